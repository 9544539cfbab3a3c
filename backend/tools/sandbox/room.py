"""How much disk the workspace may hold while a run goes on (the sandbox's side).

The server writes the most this workspace may take, in allocated bytes, to a file in a
folder the sandbox sees read-only (`backend/storage/run_room.py`). It writes it as a
run starts and again whenever another run of the same user starts or ends, sharing
what is left of the user's disk quota among their runs, so that together they can
never write past it. The worker looks at the file and at the workspace while the run
goes on, and stops the run once the workspace holds more: every 0.1 s, and every
10 ms once it is within NEAR of the limit, where a fast writer would pass it soonest. No
file: no bound but the disk's own floor. Runs in the sandbox worker: standard library only.

It is a measure, not a filesystem quota (those need root and a mount option): what a run
writes between two measures is on disk until the run is stopped and its files deleted.
"""

from __future__ import annotations

import os
import stat
import time

LIMIT_FILE = "limit"
MIN_INTERVAL = 0.1  # seconds between two measures of the workspace
NEAR = 256 * 1024 * 1024  # bytes from the limit within which ...
NEAR_INTERVAL = 0.01  # ... it is measured this often
WALK_SHARE = 20  # ... and at least this many times what a measure took (5% of a core)


class Room:
    """`over()`: whether the workspace holds more than the server's latest limit."""

    def __init__(self, folder: str, workspace: str) -> None:
        self.folder = folder
        self.workspace = workspace
        self.next_measure = 0.0

    def limit(self) -> int | None:
        try:
            with open(os.path.join(self.folder, LIMIT_FILE), "rb") as handle:
                return int(handle.read(32))
        except (OSError, ValueError):
            return None

    def over(self, now: bool = False) -> bool:
        """Measured at most every MIN_INTERVAL, unless `now` (as the run ends)."""
        started = time.monotonic()
        if started < self.next_measure and not now:
            return False
        limit = self.limit()
        if limit is None:
            self.next_measure = started + MIN_INTERVAL
            return False
        size = allocated(self.workspace)
        took = time.monotonic() - started
        interval = NEAR_INTERVAL if limit - size < NEAR else MIN_INTERVAL
        self.next_measure = started + max(interval, took * WALK_SHARE)
        return size > limit

    def due_in(self) -> float:
        """Seconds until the next measure is due."""
        return max(0.0, self.next_measure - time.monotonic())


def allocated(root: str, seen: set[tuple[int, int]] | None = None) -> int:
    """Bytes on disk under `root`, as the server counts a quota: blocks (a sparse file's
    holes are free), links not followed, a hard-linked file once (`seen`: the inodes of
    such files counted already, under other roots)."""
    total = 0
    seen = set() if seen is None else seen
    pending = [root]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                pending.append(entry.path)
            elif info.st_nlink > 1:
                if (info.st_dev, info.st_ino) in seen:
                    continue
                seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
    return total
