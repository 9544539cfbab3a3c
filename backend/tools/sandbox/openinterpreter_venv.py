"""Where the optional open-interpreter venv lives, and whether it is installed."""

from __future__ import annotations

from pathlib import Path

INSTALL_COMMAND = "make openinterpreter"
DEFAULT_VENV = Path(__file__).resolve().parents[3] / ".venv-openinterpreter"


def worker_python(venv: Path | None = None) -> Path:
    """The venv's interpreter; raises `ImportError` naming the install command if it is missing."""
    venv = DEFAULT_VENV if venv is None else venv
    python = venv / "bin" / "python"
    # `make` writes the marker last, so a half-finished install does not count.
    if not (python.exists() and (venv / ".installed").exists()):
        raise ImportError(
            "PYTHON_EXECUTOR_MODE=openinterpreter needs the optional open-interpreter "
            f"worker, which is not installed in {venv.name}: run `{INSTALL_COMMAND}`"
        )
    return python
