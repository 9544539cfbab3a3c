"""The processes below a pid, from /proc: for tests and benchmarks that kill or measure them."""

from __future__ import annotations

import os
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
