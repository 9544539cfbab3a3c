"""The processes below a pid, from /proc, for tests and benchmarks that kill or measure them;
and stopping a helper server the tests started in a process group of its own."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children, their children, …), from the parent ids in
    /proc/*/stat; processes that end meanwhile are skipped."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(name))
    found: list[int] = []
    pending = list(children.get(pid, []))
    while pending:
        current = pending.pop()
        found.append(current)
        pending += children.get(current, [])
    return found


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
