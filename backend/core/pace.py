"""A per-user pace: how much of something a user's work may spend per second.

The governor (backend/core/governor.py) keeps two, both from WORK_LIMITS:

- bytes (`mb_per_second`, table downloads). A download is cheap to ask for and dear to
  serve: each megabyte of CSV costs the server about 4 ms of CPU to build and 0.5 ms of
  its event loop to send, and a client on the same host reads 300 MB/s of it. Two
  downloads at that speed kept a 2-core server's CPUs busy, and every other user's
  requests waited in the run queue behind them (another user's table page took 2.1x as
  long; noisy_neighbour). Places bound how many downloads run, not how much each does
  per second. Sending past the pace waits on the event loop, so the thread that builds
  the next chunk is not asked for it until then: the work behind the bytes slows too.
- seconds of work (`busy_share`, exports). An export whose inputs' digests are kept
  takes a few ms of Python, holding the GIL; one user asking for them back to back kept
  a thread busy (131 a second) and every other user's requests waited for the GIL and
  the event loop (B's p50 2.5x, p99 13x). A user's next piece of work waits until their
  share allows it.

Each user has one budget, shared by all of their work of that kind on this server, with
`burst_seconds` of it to spend at once; time spent idle beyond that is not saved up.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

BURST_SECONDS = 0.25  # a download's bytes a user may send at once: a quarter second's


class Pace:
    """Users' budgets of `rate` units a second each (0: no pace), `burst_seconds` of it
    to spend at once."""

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float] = time.monotonic,
        burst_seconds: float = BURST_SECONDS,
    ) -> None:
        self.rate = rate
        self.burst = burst_seconds
        self._clock = clock
        self._free_at: dict[int, float] = {}  # when what each user spent so far is paid for

    def due(self, user_id: int, spent: float) -> float:
        """Seconds `user_id` must wait before spending more, now that `spent` more is gone."""
        if not self.rate:
            return 0.0
        now = self._clock()
        self._forget_before(now - self.burst)
        start = max(self._free_at.get(user_id, now - self.burst), now - self.burst)
        self._free_at[user_id] = start + spent / self.rate
        return max(0.0, self._free_at[user_id] - now)

    async def sent(self, user_id: int, spent: float) -> None:
        """`spent` went to `user_id`: wait on the event loop until the pace allows more."""
        wait = self.due(user_id, spent)
        if wait:
            await asyncio.sleep(wait)

    def _forget_before(self, moment: float) -> None:
        """Users whose budget is whole again need no entry (the dict stays small)."""
        for user_id in [user for user, free in self._free_at.items() if free < moment]:
            del self._free_at[user_id]
