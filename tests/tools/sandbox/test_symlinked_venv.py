"""A server whose venv is reached through a symlink (a checkout's `.venv` that links
elsewhere) still runs code: the sandbox binds the runtime at the path the worker is
started by, not only at its real path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.live_server import ROOT

SCRIPT = """
import asyncio, sys
from pathlib import Path
from backend.tools.sandbox.availability import SandboxStatus
from backend.tools.sandbox.executor import ExecutorLimits
from backend.tools.sandbox.self_check import SandboxSelfCheck

check = SandboxSelfCheck(
    Path(sys.argv[1]), SandboxStatus("bwrap", "test"), ExecutorLimits(30, 1024, 20)
)
asyncio.run(check.run())
print(check.state, check.reason)
"""


def test_a_venv_reached_through_a_symlink_runs_code(tmp_path: Path) -> None:
    link = tmp_path / "linked-venv"
    link.symlink_to(Path(sys.prefix).resolve(), target_is_directory=True)
    python = link / "bin" / "python"
    data = tmp_path / "data"
    data.mkdir()
    done = subprocess.run(
        [str(python), "-c", SCRIPT, str(data)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok", done.stdout + done.stderr
