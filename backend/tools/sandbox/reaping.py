"""Stopping what a run leaves behind: its process group, and anything it forked.

Part of the in-sandbox program (see `worker.py`); stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

isolated = True  # only in a private pid namespace may we kill "everything else"


def sweep(keep: set[int]) -> None:
    """SIGKILL every process in the sandbox except `keep` (and pid 1, the keeper).

    Returns once they are dead: a process still dying could otherwise take a
    token meant for a survivor (say, the handover byte on a pipe they share).
    A fork bomb forks while it is being killed. When only we and the keeper (pid 1)
    stay, kill(-1) signals everyone else at once, and a process with SIGKILL pending
    cannot fork. Otherwise everything is stopped first (a stopped process cannot
    fork) until a pass finds nobody new, then killed.
    """
    if not isolated:
        return  # SANDBOX=none: /proc shows the host's processes
    deadline = time.monotonic() + 5.0
    if keep <= {os.getpid(), 1}:
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        dying = _others(keep)
    else:
        dying = list(_stop_all(keep, deadline))
        for pid in dying:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    while dying and time.monotonic() < deadline:
        dying = [pid for pid in dying if _alive(pid)]
        if dying:
            time.sleep(0.002)


def _stop_all(keep: set[int], deadline: float) -> set[int]:
    """SIGSTOP the sandbox's other processes until a pass finds nobody new."""
    stopped: set[int] = set()
    while time.monotonic() < deadline:
        found = {pid for pid in _others(keep) if pid not in stopped and _alive(pid)}
        if not found:
            break
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)
        stopped |= found
    return stopped


def _others(keep: set[int]) -> list[int]:
    """The sandbox's other processes (its pid namespace's /proc)."""
    pids = (int(name) for name in os.listdir("/proc") if name.isdigit())
    return [pid for pid in pids if pid not in keep and pid != 1]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def kill_run(pid: int, keeper_pid: int) -> tuple[int, int]:
    """SIGKILL the run's process group, reap it, and stop anything it left behind."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    result = os.waitpid(pid, 0)
    sweep({os.getpid(), keeper_pid})
    return result
