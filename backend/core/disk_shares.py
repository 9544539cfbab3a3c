"""A user's runs share what is left of their disk quota while they go on.

The quota is checked before a run (`Limits.check_disk_for_run`), but a run writes while
it goes on, and a user may have several going at once (one per session, up to
USER_MAX_SANDBOXES). So each run gets a limit, the most its workspace may hold: what it
holds now plus an equal share of what is left of the quota. Shares are dealt again,
after a fresh walk of the user's folders, whenever one of their runs starts or ends, so
together their runs can never write past the quota (the worker stops a run past its
limit: `backend/tools/sandbox/room.py`). A run alone gets all that is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from backend.core.disk_usage import DiskUsage
from backend.storage.run_room import set_limit
from backend.storage.sessions import owner_of

logger = logging.getLogger(__name__)


class DiskShares:
    """`held(key, workspace)` around each run: its share of its owner's quota."""

    def __init__(self, disk: DiskUsage, quota_bytes: Callable[[int], int]) -> None:
        """`quota_bytes(user id)`: that user's disk quota (reads the store)."""
        self.disk = disk
        self.quota_bytes = quota_bytes
        self._runs: dict[int, dict[str, Path]] = {}  # user id -> their running workspaces
        self._locks: dict[int, asyncio.Lock] = {}
        self._dealing: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def held(self, key: str, workspace: Path) -> AsyncIterator[None]:
        user_id = owner_of(key)
        runs = self._runs.setdefault(user_id, {})
        runs[key] = workspace
        try:
            await self._deal(user_id)
            yield
        finally:
            runs.pop(key, None)
            set_limit(workspace, None)
            if runs:  # the others may have more now; not awaited (this may be a cancel)
                task = asyncio.create_task(self._deal(user_id))
                self._dealing.add(task)
                task.add_done_callback(self._dealing.discard)
            elif self._runs.get(user_id) is runs:
                del self._runs[user_id]
                self._locks.pop(user_id, None)

    async def _deal(self, user_id: int) -> None:
        lock = self._locks.setdefault(user_id, asyncio.Lock())
        async with lock:  # one walk at a time per user; a run waits for its share
            runs = dict(self._runs.get(user_id, {}))
            if not runs:
                return
            try:
                await asyncio.to_thread(self._write_shares, user_id, runs)
            except OSError:  # the checks before the run still hold; this one is lost
                logger.exception("Could not share user %d's disk quota among their runs", user_id)

    def _write_shares(self, user_id: int, runs: dict[str, Path]) -> None:
        sizes = {os.path.abspath(path): size for path, size in self.disk.measure(user_id).items()}
        left = max(self.quota_bytes(user_id) - sum(sizes.values()), 0)
        share = left // len(runs)
        for workspace in runs.values():
            set_limit(workspace, sizes.get(os.path.abspath(workspace), 0) + share)
