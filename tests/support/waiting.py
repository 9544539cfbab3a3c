"""Waiting for something a test can observe (a file, a server's answer), never a fixed delay."""

from __future__ import annotations

import time
from collections.abc import Callable

POLL_SECONDS = 0.02


def wait_for(condition: Callable[[], bool], timeout: float = 30) -> None:
    """Until `condition()` holds, checked every 20 ms; fails the test after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"still not true after {timeout:g} s"
        time.sleep(POLL_SECONDS)
