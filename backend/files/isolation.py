"""Parse untrusted files in a separate, resource-limited process.

Workspace files come from users and from sandboxed code. Their metadata is read
with native parsers (HDF5, Arrow, Pillow, PDF), where a crafted file can crash
the process or claim gigabytes. So parsing happens in one long-lived helper
process with an address-space limit and a per-call time limit: a crash, a hang
or a memory blow-up costs that process (it is replaced), never the server.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import resource
import threading
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

T = TypeVar("T")

MEMORY_LIMIT = 2 * 1024**3  # address space, bytes: pandas and Arrow need headroom
CPU_LIMIT = 600  # seconds over the helper's life; past it the helper is replaced
CALL_TIMEOUT = 30.0


class IsolatedCallFailed(Exception):
    """The helper process crashed, ran out of memory or time; the message says which."""


def _limit_resources() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT, CPU_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


class IsolatedRunner:
    """Runs picklable module-level functions in the helper process, one call at a time."""

    def __init__(self, timeout: float = CALL_TIMEOUT) -> None:
        self.timeout = timeout
        self._pool: concurrent.futures.ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _start(self) -> concurrent.futures.ProcessPoolExecutor:
        # spawn: forking the server would copy its threads and event loop.
        return concurrent.futures.ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_limit_resources,
        )

    def call(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` in the helper; its own exceptions are raised as they are."""
        with self._lock:
            if self._pool is None:
                self._pool = self._start()
            future = self._pool.submit(function, *args)
            try:
                return future.result(timeout=self.timeout)
            except BrokenProcessPool:
                self._discard()
                raise IsolatedCallFailed("the file crashed the reader") from None
            except concurrent.futures.TimeoutError:
                self._discard()
                raise IsolatedCallFailed(
                    f"reading the file took longer than {self.timeout:g} s"
                ) from None
            except MemoryError:
                raise IsolatedCallFailed("reading the file needed too much memory") from None

    def _discard(self) -> None:
        pool, self._pool = self._pool, None
        if pool is None:
            return
        for process in list(getattr(pool, "_processes", {}).values()):
            process.kill()  # a hung call never returns by itself
        pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        with self._lock:
            self._discard()
