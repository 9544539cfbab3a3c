"""One warm executor per active session, chosen by PYTHON_EXECUTOR_MODE.

How many may be warm at once is bounded per user and for the host
(`admission.SandboxCaps`): starting one more stops the least recently used idle
one first, whose variables stay on disk.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Protocol

from backend.config import Settings
from backend.observability.metrics import SANDBOX_EVICTIONS
from backend.storage.sessions import SessionKey, check_key
from backend.storage.workspaces import Workspaces
from backend.tools.sandbox.admission import SandboxCaps
from backend.tools.sandbox.availability import SandboxStatus
from backend.tools.sandbox.cgroups import remove_stale
from backend.tools.sandbox.data_channel import Answerer, DataChannel
from backend.tools.sandbox.executor import (
    OUTER_GRACE,
    BasePythonExecutor,
    ExecutionResult,
    ExecutorLimits,
    RunObserver,
    SandboxedExecutor,
)
from backend.tools.sandbox.openinterpreter_venv import worker_python

logger = logging.getLogger(__name__)

EXECUTOR_MODES = ("native", "openinterpreter")
MIN_HOST_SANDBOXES = 4  # HOST_MAX_SANDBOXES=0 on a small machine


def host_max_sandboxes(settings: Settings) -> int:
    """HOST_MAX_SANDBOXES, or (0) as many as the host's memory holds at their memory limit."""
    if settings.HOST_MAX_SANDBOXES:
        return settings.HOST_MAX_SANDBOXES
    memory_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 1024**2
    return max(MIN_HOST_SANDBOXES, memory_mb // settings.PYTHON_CODE_MAX_MEMORY)


def check_mode(mode: str) -> None:
    """PYTHON_EXECUTOR_MODE, never silently replaced by another mode."""
    if mode not in EXECUTOR_MODES:
        raise ValueError(f"PYTHON_EXECUTOR_MODE must be one of {', '.join(EXECUTOR_MODES)}")
    if mode == "openinterpreter":
        # Its code runs in this same sandbox; only the optional worker must be there.
        worker_python()  # raises ImportError naming `make openinterpreter`


class SessionExecutors(Protocol):
    """Where sessions' code runs: `ExecutorPool` here, or `RayExecutorPool` on a cluster."""

    on_run: RunObserver | None  # told of every run, with its session's key

    def limits(self) -> ExecutorLimits: ...

    def get_python_executor(self, session_id: SessionKey) -> BasePythonExecutor: ...

    async def reap_idle(self, idle_seconds: float) -> int: ...

    def warm_count(self) -> int:
        """Sandboxes with a worker running on this server (for the metrics)."""
        ...

    async def discard(self, session_id: SessionKey) -> None:
        """Stop the session's sandbox, if one is warm (a deleted session)."""
        ...

    async def close_all(self) -> None: ...


class ExecutorPool:
    def __init__(
        self,
        settings: Settings,
        sandbox: SandboxStatus,
        workspaces: Workspaces,
        max_sandboxes: Callable[[int], int] | None = None,
    ) -> None:
        """`max_sandboxes(user id)`: that user's cap (default: USER_MAX_SANDBOXES for all)."""
        self.settings = settings
        self.sandbox = sandbox
        self.workspaces = workspaces
        self.caps = SandboxCaps(
            host_max=host_max_sandboxes(settings),
            user_max=max_sandboxes or (lambda _: settings.USER_MAX_SANDBOXES),
            retry_after=settings.PYTHON_CODE_TIMEOUT + OUTER_GRACE,
        )
        self._executors: dict[SessionKey, SandboxedExecutor] = {}
        self.on_run: RunObserver | None = None
        # Held around each run: its share of the owner's disk quota (`DiskShares.held`).
        self.room: Callable[[SessionKey, Path], AbstractAsyncContextManager[None]] | None = None
        # Answers `sql()` in a run (`data_channel.py`); None: runs have no data sources.
        self.answer_query: Answerer | None = None
        self._channels: dict[SessionKey, DataChannel] = {}
        if sandbox.isolated and (stale := remove_stale()):
            logger.info("Removed %d cgroups left by an earlier server", stale)

    def limits(self) -> ExecutorLimits:
        return ExecutorLimits(
            timeout=self.settings.PYTHON_CODE_TIMEOUT,
            max_memory_mb=self.settings.PYTHON_CODE_MAX_MEMORY,
            max_file_mb=self.settings.PYTHON_CODE_MAX_FILE_SIZE,
            max_processes=self.settings.SANDBOX_MAX_PROCESSES,
        )

    def get_python_executor(self, session_id: SessionKey) -> BasePythonExecutor:
        """The session's executor; never a silent fallback to another mode."""
        check_mode(self.settings.PYTHON_EXECUTOR_MODE)
        executor = self._executors.get(check_key(session_id))
        if executor is None:
            workspace = self.workspaces.ensure(session_id)
            executor = SandboxedExecutor(workspace, self.limits(), self.sandbox)
            executor.before_start = functools.partial(self._make_room, session_id, executor)
            executor.after_run = functools.partial(self._ran, session_id)
            if self.room is not None:
                executor.room = functools.partial(self.room, session_id, workspace)
            if self.answer_query is not None:
                channel = self._channels.get(session_id)
                if channel is None:
                    channel = self._channels[session_id] = DataChannel(
                        session_id, self.answer_query
                    )
                executor.data_folder = channel.folder
                executor.data_channel = channel.during_run
            self._executors[session_id] = executor
        return executor

    def _ran(self, key: SessionKey, result: ExecutionResult) -> None:
        if self.on_run is not None:
            self.on_run(key, result)

    def warm(self) -> dict[SessionKey, SandboxedExecutor]:
        """The sessions whose worker is running or starting."""
        return {key: executor for key, executor in self._executors.items() if executor.warm}

    def warm_count(self) -> int:
        return len(self.warm())

    async def _make_room(self, key: SessionKey, executor: SandboxedExecutor) -> None:
        """Before `key`'s worker starts: stop what the caps say (or refuse)."""
        # One reaped while a turn still held it starts again: it is counted again too.
        self._executors.setdefault(key, executor)
        stop = self.caps.to_stop(key, self.warm())  # decided with no await: nobody interleaves
        if stop:
            logger.info("Stopping %d idle sandbox(es) to start another's", len(stop))
            SANDBOX_EVICTIONS.labels("room").inc(len(stop))
            await asyncio.gather(*(self._executors[other].close() for other in stop))

    async def reap_idle(self, idle_seconds: float) -> int:
        """Stop workers idle longer than `idle_seconds`; their variables stay on disk."""
        now = time.monotonic()
        idle = [
            sid
            for sid, executor in self._executors.items()
            if not executor.busy and now - executor.last_used > idle_seconds
        ]
        for session_id in idle:
            executor = self._executors.pop(session_id, None)
            if executor is not None:
                await executor.close()
            await self._close_channel(session_id)
        if idle:
            logger.info("Reaped %d idle sandbox workers", len(idle))
            SANDBOX_EVICTIONS.labels("idle").inc(len(idle))
        return len(idle)

    async def discard(self, session_id: SessionKey) -> None:
        executor = self._executors.pop(session_id, None)
        if executor is not None:
            await executor.close()
        await self._close_channel(session_id)

    async def _close_channel(self, session_id: SessionKey) -> None:
        channel = self._channels.pop(session_id, None)
        if channel is not None:
            await channel.close()

    async def close_all(self) -> None:
        executors, self._executors = list(self._executors.values()), {}
        await asyncio.gather(*(executor.close() for executor in executors))
        channels, self._channels = list(self._channels.values()), {}
        await asyncio.gather(*(channel.close() for channel in channels))
