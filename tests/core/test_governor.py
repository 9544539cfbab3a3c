"""The governor in process: per-user and server places, the wait, the time limit, and a
place that is kept until its thread has really ended (issue 40)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from backend.config import ConfigError, load_settings
from backend.config.settings import BUSY_BURST_SECONDS
from backend.core.governor import WAITING_PER_USER, Governor, WorkTimedOut
from backend.core.limits import LimitReached


def _governor(**share: float) -> Governor:
    settings = load_settings(WORK_LIMITS={"table_query": share}, WORK_WAIT_SECONDS=0.2)
    return Governor(settings)


async def test_a_user_past_their_share_waits_for_their_own_then_hears_429() -> None:
    governor = _governor(total=2, per_user=1, seconds=30)
    async with governor.hold("table_query", 1):
        waiting = [
            asyncio.ensure_future(governor.hold("table_query", 1).__aenter__())
            for _ in range(WAITING_PER_USER)
        ]
        await asyncio.sleep(0)  # each runs until it waits for the user's one place
        assert governor.held("table_query", 1) == 1 + WAITING_PER_USER
        with pytest.raises(LimitReached) as at_once:  # that many waiting: no more
            async with governor.hold("table_query", 1):
                pass
        assert at_once.value.status_code == 429 and at_once.value.retry_after
        async with governor.hold("table_query", 2):  # another user takes the server's other
            pass
        for each in waiting:  # none of the user's ended in time
            with pytest.raises(LimitReached) as late:
                await each
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


def _busy_governor(wait: float) -> Governor:
    limits = {"export": {"total": 4, "per_user": 1, "busy_share": 0.5}}
    return Governor(load_settings(WORK_LIMITS=limits, WORK_WAIT_SECONDS=wait))


def _busy(seconds: float) -> None:
    """Keep this thread busy for `seconds` of its CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def _work(governor: Governor, user_id: int, seconds: float) -> None:
    """A piece of `user_id`'s export work that keeps a thread busy `seconds`."""
    async with governor.hold("export", user_id) as held:
        await held.run(_busy, seconds)


async def test_a_user_past_their_busy_share_waits_for_it() -> None:
    """An export whose inputs' digests are kept takes a few ms of Python: one user asking
    for them back to back kept a thread, and the GIL, busy for everyone (noisy_neighbour)."""
    governor = _busy_governor(wait=0.1)
    async with governor.hold("export", 1) as held:  # waiting is not work: no CPU time
        await held.run(threading.Event().wait, BUSY_BURST_SECONDS + 0.2)
    await _work(governor, 1, 0)  # not refused: there is nothing to wait for
    governor = _busy_governor(wait=5)
    loop = asyncio.get_running_loop()
    await _work(governor, 1, BUSY_BURST_SECONDS + 0.2)  # the burst, and 0.2 s past it
    began = loop.time()
    await _work(governor, 1, 0)  # waits for 0.2 s of work at half a thread's time
    assert loop.time() - began >= 0.4 - 0.05
    assert governor.held("export", 1) == 0


async def test_past_the_servers_wait_it_is_a_429_at_once_and_only_for_that_user() -> None:
    governor = _busy_governor(wait=0.5)
    loop = asyncio.get_running_loop()
    await _work(governor, 1, BUSY_BURST_SECONDS + 1)  # 2 s to wait, at half a thread
    began = loop.time()
    with pytest.raises(LimitReached) as refused:
        await _work(governor, 1, 0)
    assert loop.time() - began < 0.45  # not after waiting for nothing
    assert refused.value.status_code == 429 and refused.value.code == "too_many_requests"
    assert refused.value.retry_after in (2, 3)  # 2 s and a hair, rounded up
    assert "50%" in refused.value.message
    assert governor.held("export", 1) == 0
    await _work(governor, 2, 0)  # another user's budget is whole


def test_a_busy_share_for_work_that_runs_in_no_server_thread_is_refused() -> None:
    with pytest.raises(ConfigError, match="busy_share is for"):
        load_settings(WORK_LIMITS={"chat_stream": {"busy_share": 0.5}})
    with pytest.raises(ConfigError, match="busy_share"):
        load_settings(WORK_LIMITS={"export": {"busy_share": 1.5}})
