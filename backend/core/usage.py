"""Each user's usage as it happens: a turn's model calls and tokens (python_coder's too),
and every sandbox run's CPU and wall seconds.

Amounts are added in memory on the event loop (a few dict operations) and written to
the store, off the loop, every `FLUSH_SECONDS` and at shutdown: a crash loses at most
the last few seconds of usage. What a user used today, as the limits read it, is the
store's row plus what this server has not written yet; another API server's unwritten
amounts show within `FLUSH_SECONDS`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from backend.llm.turn import LLMUsage
from backend.storage import Store, UsageCounts, UsageDay
from backend.storage.sessions import SessionKey, owner_of
from backend.tools.sandbox.executor import ExecutionResult

logger = logging.getLogger(__name__)

FLUSH_SECONDS = 2.0
Clock = Callable[[], float]


def utc_day(when: float) -> str:
    """The UTC day `when` (epoch seconds) falls on, as YYYY-MM-DD."""
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d")


def next_midnight(when: float) -> float:
    """The next 00:00 UTC after `when`, when the daily limits start again."""
    day = datetime.fromtimestamp(when, UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return (day + timedelta(days=1)).timestamp()


def last_days(when: float, days: int) -> list[str]:
    """The `days` UTC days that end with `when`'s, oldest first."""
    return [utc_day(when - back * 86400) for back in range(days - 1, -1, -1)]


def llm_counts(usage: LLMUsage) -> UsageCounts:
    return UsageCounts(
        llm_calls=usage.calls,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
    )


def run_counts(result: ExecutionResult) -> UsageCounts:
    return UsageCounts(
        sandbox_runs=1,
        sandbox_cpu_seconds=result.cpu_time,
        sandbox_wall_seconds=result.execution_time,
    )


class UsageMeter:
    """Usage by user and UTC day, kept in memory until written to the store."""

    def __init__(self, store: Store, clock: Clock = time.time) -> None:
        self.store = store
        self.clock = clock
        self._pending: dict[tuple[int, str], UsageCounts] = {}
        self._pending_lock = threading.Lock()  # held for dict operations only
        # One write, or one read of a user's day, at a time: an amount being written is
        # then either still pending or already in the store, never counted twice or lost.
        self._writing = threading.Lock()

    def add(self, user_id: int, counts: UsageCounts) -> None:
        key = (user_id, utc_day(self.clock()))
        with self._pending_lock:
            self._pending[key] = self._pending.get(key, UsageCounts()) + counts

    def add_run(self, session_key: SessionKey, result: ExecutionResult) -> None:
        """A sandbox run of the session `session_key` (the pools call this)."""
        self.add(owner_of(session_key), run_counts(result))

    def flush(self) -> None:
        """Write what is pending (blocking: call it in a thread); kept for the next try
        if the store fails."""
        with self._writing:
            with self._pending_lock:
                batch, self._pending = self._pending, {}
            if not batch:
                return
            try:
                self.store.add_usage([(uid, day, counts) for (uid, day), counts in batch.items()])
            except Exception:
                with self._pending_lock:
                    for key, counts in batch.items():
                        self._pending[key] = self._pending.get(key, UsageCounts()) + counts
                raise

    def today(self, user_id: int) -> UsageCounts:
        """What the user used today, written or not (blocking: call it in a thread)."""
        day = utc_day(self.clock())
        with self._writing:
            stored = self.store.usage_days(user_id, day)
            with self._pending_lock:
                pending = self._pending.get((user_id, day), UsageCounts())
        return (stored[0].counts if stored else UsageCounts()) + pending

    def days(self, user_id: int, days: list[str]) -> list[UsageDay]:
        """The user's use on each of `days` (oldest first), written first (blocking)."""
        self.flush()
        stored = {d.day: d.counts for d in self.store.usage_days(user_id, days[0])}
        return [UsageDay(day, stored.get(day, UsageCounts())) for day in days]

    async def run(self) -> None:
        """Write the pending usage every FLUSH_SECONDS, until cancelled."""
        while True:
            await asyncio.sleep(FLUSH_SECONDS)
            try:
                await asyncio.to_thread(self.flush)
            except Exception:  # kept in memory: the next round tries again
                logger.exception("Writing usage failed")

    async def close(self) -> None:
        """The last write, at shutdown."""
        try:
            await asyncio.to_thread(self.flush)
        except Exception:
            logger.exception("Writing usage at shutdown failed: the last seconds' usage is lost")
