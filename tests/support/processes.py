"""Stopping a helper server the tests started in a process group of its own."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess


def stop_group(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the process group, SIGKILL it if it lingers past `timeout` s, then reap the
    leader."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # also any child left in the group
    process.wait()
