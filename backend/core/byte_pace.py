"""A per-user pace for the bytes the server builds and sends (WORK_LIMITS `mb_per_second`).

A table download is cheap to ask for and dear to serve: each megabyte of CSV costs the
server about 4 ms of CPU to build and 0.5 ms of its event loop to send, and a client on
the same host reads 300 MB/s of it. Two downloads at that speed kept a 2-core server's
CPUs busy, and every other user's requests waited in the run queue behind them (another
user's table page took 2.1x as long; noisy_neighbour). Places bound how many downloads
run, not how much work each does per second; the pace bounds that.

Each user has one budget of bytes per second, shared by all of their downloads on this
server, with a quarter of a second of it to spend at once. Sending past it waits on the
event loop (never in a thread), so the thread that builds the next chunk is not asked
for it until then: the work behind the bytes slows down with them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

BURST_SECONDS = 0.25  # of the pace a user may send at once, after a pause


class BytePace:
    """Users' budgets of `bytes_per_second` each (0: no pace)."""

    def __init__(
        self, bytes_per_second: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = bytes_per_second
        self._clock = clock
        self._free_at: dict[int, float] = {}  # when each user's bytes sent so far are paid for

    def due(self, user_id: int, sent: int) -> float:
        """Seconds to wait before `user_id` sends more, now that `sent` more bytes have gone."""
        if not self.rate:
            return 0.0
        now = self._clock()
        self._forget_before(now - BURST_SECONDS)
        start = max(self._free_at.get(user_id, now - BURST_SECONDS), now - BURST_SECONDS)
        self._free_at[user_id] = start + sent / self.rate
        return max(0.0, self._free_at[user_id] - now)

    async def sent(self, user_id: int, sent: int) -> None:
        """`sent` bytes went to `user_id`: wait on the event loop until the pace allows more."""
        wait = self.due(user_id, sent)
        if wait:
            await asyncio.sleep(wait)

    def _forget_before(self, moment: float) -> None:
        """Users whose budget is whole again need no entry (the dict stays small)."""
        for user_id in [user for user, free in self._free_at.items() if free < moment]:
            del self._free_at[user_id]
