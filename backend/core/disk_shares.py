"""A user's runs share what is left of their disk quota while they go on.

The quota is checked before a run (`Limits.check_disk_for_run`), but a run writes while
it goes on, and a user may have several going at once (one per session, up to
USER_MAX_SANDBOXES). So each run gets a limit, the most its workspace may hold: what it
holds now plus an equal share of what is left of the quota. Shares are dealt again,
after a fresh walk of the user's folders, whenever one of their runs starts or ends, so
together their runs can never write past the quota (the worker stops a run past its
limit: `backend/tools/sandbox/room.py`). A run alone gets all that is left.

What the server itself writes for the user while their runs go on (a turn's snapshot, a
branch's restore) takes part alike: `writing(key)` deals it a share too and answers it,
the most it may write, so it never spends what a run was dealt (or the reverse).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from backend.core.disk_usage import DiskUsage
from backend.storage.run_room import set_limit
from backend.storage.sessions import SessionKey, owner_of

logger = logging.getLogger(__name__)


class DiskShares:
    """`held(key, workspace)` around each run, `writing(key)` around the server's own
    writing for a user: their shares of the owner's quota."""

    def __init__(self, disk: DiskUsage, quota_bytes: Callable[[int], int]) -> None:
        """`quota_bytes(user id)`: that user's disk quota (reads the store)."""
        self.disk = disk
        self.quota_bytes = quota_bytes
        # User id -> who writes for them now: a run's workspace, or None (the server's).
        self._writers: dict[int, dict[str, Path | None]] = {}
        self._shares: dict[str, int] = {}  # the server's writers' latest shares
        self._locks: dict[int, asyncio.Lock] = {}
        self._dealing: set[asyncio.Task[None]] = set()

    @contextlib.asynccontextmanager
    async def held(self, key: SessionKey, workspace: Path) -> AsyncIterator[None]:
        """Around a run in `workspace`: its limit is written where the sandbox reads it."""
        async with self._taking_part(key, key, workspace):
            yield

    @contextlib.asynccontextmanager
    async def writing(self, key: SessionKey) -> AsyncIterator[int]:
        """Around the server's writing for `key`'s owner: the bytes it may write."""
        writer = f"{key}#{uuid.uuid4().hex}"
        async with self._taking_part(key, writer, None):
            yield self._shares.get(writer, 0)

    @contextlib.asynccontextmanager
    async def _taking_part(
        self, key: SessionKey, writer: str, workspace: Path | None
    ) -> AsyncIterator[None]:
        user_id = owner_of(key)
        writers = self._writers.setdefault(user_id, {})
        writers[writer] = workspace
        try:
            await self._deal(user_id)
            yield
        finally:
            self.disk.changed(user_id)  # it wrote what nobody knows: the next check walks
            writers.pop(writer, None)
            self._shares.pop(writer, None)
            if workspace is not None:
                set_limit(workspace, None)
            if writers:  # the others may have more now; not awaited (this may be a cancel)
                task = asyncio.create_task(self._deal(user_id))
                self._dealing.add(task)
                task.add_done_callback(self._dealing.discard)
            elif self._writers.get(user_id) is writers:
                del self._writers[user_id]
                self._locks.pop(user_id, None)

    async def _deal(self, user_id: int) -> None:
        lock = self._locks.setdefault(user_id, asyncio.Lock())
        async with lock:  # one walk at a time per user; a writer waits for its share
            writers = dict(self._writers.get(user_id, {}))
            if not writers:
                return
            try:
                await asyncio.to_thread(self._write_shares, user_id, writers)
            except OSError:  # the checks before the run still hold; this one is lost
                logger.exception("Could not share user %d's disk quota among their runs", user_id)

    def _write_shares(self, user_id: int, writers: dict[str, Path | None]) -> None:
        sizes = {os.path.abspath(path): size for path, size in self.disk.measure(user_id).items()}
        left = max(self.quota_bytes(user_id) - sum(sizes.values()), 0)
        share = left // len(writers)
        for writer, workspace in writers.items():
            if workspace is None:
                self._shares[writer] = share
            else:
                set_limit(workspace, sizes.get(os.path.abspath(workspace), 0) + share)
