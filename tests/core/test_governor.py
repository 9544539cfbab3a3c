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


async def test_a_user_past_their_share_waits_for_their_own_then_hears_429() -> None:
    governor = _governor(total=2, per_user=1, seconds=30)
    async with governor.hold("table_query", 1):
        waiting = asyncio.ensure_future(governor.hold("table_query", 1).__aenter__())
        await asyncio.sleep(0)  # it runs until it waits for the user's one place
        assert governor.held("table_query", 1) == 2
        with pytest.raises(LimitReached) as at_once:  # as many waiting as holding: no more
            async with governor.hold("table_query", 1):
                pass
        assert at_once.value.status_code == 429 and at_once.value.retry_after
        async with governor.hold("table_query", 2):  # another user takes the server's other
            pass
        with pytest.raises(LimitReached) as late:  # none of the user's ended in time
            await waiting
        assert late.value.status_code == 429 and late.value.code == "too_many_requests"
    assert governor.held("table_query", 1) == 0


async def test_a_waiting_request_takes_the_place_its_user_gives_back() -> None:
    governor = _governor(total=2, per_user=1, seconds=30)
    first = await governor.take("table_query", 1)
    second = asyncio.ensure_future(governor.take("table_query", 1))
    await asyncio.sleep(0)
    first.release()  # the page the UI no longer wants
    (await second).release()
    assert governor.held("table_query", 1) == 0


async def test_with_every_place_taken_another_user_waits_then_hears_503() -> None:
    governor = _governor(total=1, per_user=1, seconds=30)
    async with governor.hold("table_query", 1):
        with pytest.raises(LimitReached) as busy:
            async with governor.hold("table_query", 2):
                pass
        assert busy.value.status_code == 503 and busy.value.code == "server_busy"
        assert governor.held("table_query", 2) == 0
    async with governor.hold("table_query", 2):  # free again
        pass


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


async def test_an_interrupt_that_comes_before_the_work_can_hear_it_is_repeated() -> None:
    """A request cancelled as its query starts: DuckDB's interrupt, called before the
    query runs, is lost; one call left the query to run to its end for nobody."""
    governor = _governor(total=1, per_user=1, seconds=30)
    running, gate, listening, heard = (threading.Event() for _ in range(4))
    interrupted = threading.Event()

    def work() -> str:
        running.set()
        gate.wait(10)  # the query has not started: nothing to interrupt yet
        listening.set()
        heard.wait(10)
        return "ran to its end"

    def interrupt() -> None:
        interrupted.set()
        if listening.is_set():
            heard.set()

    async with governor.hold("table_query", 1) as held:
        task = asyncio.ensure_future(held.run(work, interrupt=interrupt))
        await asyncio.to_thread(running.wait, 10)
        task.cancel()
        await asyncio.to_thread(interrupted.wait, 10)
        gate.set()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert heard.is_set()
