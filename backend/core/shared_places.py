"""A user's governor share held across the API servers that share one database.

Each server's `Governor` bounds the work it does itself: its own places in all (its
CPU, its memory) and per user. Behind a load balancer one user's requests reach every
server, so per user that bound would be multiplied by the servers. With PostgreSQL
(the only database several servers share), each place a server gives a user also takes
a row in `work_places` (`backend/storage/work_places.py`), counted across the servers.
A user at their share waits for one of their places on any server to end, looking
again every POLL_SECONDS within WORK_WAIT_SECONDS, then gets the governor's 429.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
import uuid

from backend.storage.base import Store

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.2
GRACE_SECONDS = 60.0  # past the work's time limit, a row a dead server left expires


class SharedPlaces:
    """Places per user in the database, for the servers that share it."""

    def __init__(self, store: Store, server_id: str) -> None:
        self.store = store
        self.server_id = server_id
        # Releases happen where a place ends (a finaliser, a sync callback): off the loop.
        self._releases = concurrent.futures.ThreadPoolExecutor(
            max_workers=2, thread_name_prefix="work-places"
        )
        left = store.release_server_work_places(server_id)
        if left:
            logger.info("Released %d work places this server held before it stopped", left)

    async def take(
        self, kind: str, user_id: int, per_user: int, seconds: float, wait: float
    ) -> str | None:
        """A place's id, or None if the user held `per_user` on all servers for `wait` s."""
        place_id = uuid.uuid4().hex
        loop = asyncio.get_running_loop()
        give_up = loop.time() + wait
        while True:
            now = time.time()
            taken = await asyncio.to_thread(
                self.store.take_work_place,
                place_id,
                kind,
                user_id,
                self.server_id,
                per_user=per_user,
                now=now,
                expires_at=now + seconds + GRACE_SECONDS,
            )
            if taken:
                return place_id
            if loop.time() + POLL_SECONDS > give_up:
                return None
            await asyncio.sleep(POLL_SECONDS)  # another server's place: no event reaches us

    def release(self, place_id: str) -> None:
        """Give the place back (soon, in a thread of its own); an error leaves it to expire."""
        future = self._releases.submit(self.store.release_work_place, place_id)
        future.add_done_callback(_log_failure)

    def close(self) -> None:
        self._releases.shutdown(wait=True)


def _log_failure(future: concurrent.futures.Future[None]) -> None:
    if (error := future.exception()) is not None:
        logger.warning("A work place was not released (it expires by itself): %s", error)
