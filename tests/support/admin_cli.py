"""`python -m backend.admin` as an operator runs it, for backup and restore tests."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.live_server import ROOT


def admin(*args: str, **settings: str) -> subprocess.CompletedProcess[str]:
    """The command as an operator runs it, with a server's settings."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
    env.update(DATABASE_URL="", **settings)
    return subprocess.run(
        [sys.executable, "-m", "backend.admin", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
