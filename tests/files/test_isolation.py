"""A file that crashes, hangs or bloats its reader costs the helper process, not the server."""

from __future__ import annotations

import os
import time

import pytest

from backend.files.isolation import IsolatedCallFailed, IsolatedRunner


def crash() -> None:
    os.abort()


def hang() -> None:
    time.sleep(60)


def bloat() -> bytes:
    return bytes(8 * 1024**3)


def pid() -> int:
    return os.getpid()


def refuse() -> None:
    raise ValueError("not a table")


@pytest.fixture(scope="module")
def runner() -> IsolatedRunner:
    running = IsolatedRunner(timeout=20)
    yield running  # type: ignore[misc]
    running.close()


def test_calls_run_in_one_reused_helper_process(runner: IsolatedRunner) -> None:
    first = runner.call(pid)
    assert first != os.getpid() and runner.call(pid) == first
    with pytest.raises(ValueError, match="not a table"):
        runner.call(refuse)  # the function's own errors arrive as they are
    assert runner.call(pid) == first


def test_a_crash_replaces_the_helper(runner: IsolatedRunner) -> None:
    before = runner.call(pid)
    with pytest.raises(IsolatedCallFailed, match="crashed"):
        runner.call(crash)
    assert runner.call(pid) != before


def test_memory_is_capped(runner: IsolatedRunner) -> None:
    with pytest.raises(IsolatedCallFailed, match="too much memory"):
        runner.call(bloat)
    assert runner.call(pid) > 0


def test_a_hang_is_cut_off_and_the_helper_replaced() -> None:
    runner = IsolatedRunner(timeout=3)
    try:
        before = runner.call(pid)
        started = time.monotonic()
        with pytest.raises(IsolatedCallFailed, match="longer than 3 s"):
            runner.call(hang)
        assert time.monotonic() - started < 10
        assert runner.call(pid) != before
    finally:
        runner.close()
