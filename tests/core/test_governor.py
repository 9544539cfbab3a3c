"""The governor in process: per-user and server places, the wait, the time limit, and a
place that is kept until its thread has really ended (issue 40)."""

from __future__ import annotations

import asyncio
import threading

import pytest

from backend.config import load_settings
from backend.core.governor import Governor, WorkTimedOut
from backend.core.limits import LimitReached


def _governor(**share: float) -> Governor:
    settings = load_settings(WORK_LIMITS={"table_query": share}, WORK_WAIT_SECONDS=0.2)
    return Governor(settings)


async def test_a_user_past_their_share_is_refused_at_once_and_waiting_counts() -> None:
    governor = _governor(total=1, per_user=2, seconds=30)
    async with governor.hold("table_query", 1):
        waiting = asyncio.ensure_future(governor.hold("table_query", 1).__aenter__())
        await asyncio.sleep(0)  # the second runs until it waits for the only place
        assert governor.held("table_query", 1) == 2
        with pytest.raises(LimitReached) as refused:
            async with governor.hold("table_query", 1):
                pass
        assert refused.value.status_code == 429 and refused.value.retry_after
        with pytest.raises(LimitReached) as busy:  # another user waits, then hears 503
            async with governor.hold("table_query", 2):
                pass
        assert busy.value.status_code == 503 and busy.value.code == "server_busy"
        assert governor.held("table_query", 2) == 0
    with pytest.raises(LimitReached):  # the first user's waiter also gave up by now
        await waiting
    assert governor.held("table_query", 1) == 0


async def test_work_past_its_time_is_interrupted_and_its_place_kept_until_it_ends() -> None:
    governor = _governor(total=1, per_user=1, seconds=0.05)
    stop, ended = threading.Event(), threading.Event()

    def work() -> str:
        stop.wait(30)
        ended.set()
        return "late"

    with pytest.raises(WorkTimedOut) as late:
        async with governor.hold("table_query", 1) as held:
            await held.run(work, interrupt=stop.set)
    assert late.value.status_code == 503 and late.value.code == "work_timed_out"
    assert ended.is_set()  # the thread ended before the place came back
    assert governor.held("table_query", 1) == 0


async def test_a_cancelled_request_interrupts_its_work_and_waits_for_the_thread() -> None:
    governor = _governor(total=1, per_user=1, seconds=30)
    started, stop, ended = threading.Event(), threading.Event(), threading.Event()

    def work() -> None:
        started.set()
        stop.wait(30)
        ended.set()

    async def request() -> None:
        async with governor.hold("table_query", 1) as held:
            await held.run(work, interrupt=stop.set)

    task = asyncio.ensure_future(request())
    assert await asyncio.to_thread(started.wait, 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ended.is_set() and governor.held("table_query", 1) == 0
    async with governor.hold("table_query", 2):  # the place is free again
        pass
