"""A `bwrap` for PATH with which no sandbox starts, for the tests of that failure.

It passes the server's availability probe (the one command that runs `true`) to the real
bubblewrap, and gives every other command one more bind, of a path that does not exist:
the real bubblewrap then refuses to start and says why on stderr, as it would for any
bad bind.
"""

from __future__ import annotations

import shutil
from pathlib import Path

MISSING = "/nonexistent-bind-for-the-selfcheck-test"


def broken_bwrap_path(folder: Path, path: str) -> str:
    """A PATH (`path` behind `folder`) whose `bwrap` is that one; `folder` is created."""
    real = shutil.which("bwrap")
    assert real is not None, "bubblewrap is not installed"
    folder.mkdir(parents=True, exist_ok=True)
    fake = folder / "bwrap"
    fake.write_text(
        "#!/bin/sh\n"
        'for last in "$@"; do :; done\n'
        f'if [ "$last" = true ]; then exec {real} "$@"; fi\n'
        f'exec {real} --ro-bind {MISSING} /missing "$@"\n'
    )
    fake.chmod(0o755)
    return f"{folder}:{path}"
