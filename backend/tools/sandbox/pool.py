"""One warm executor per active session, chosen by PYTHON_EXECUTOR_MODE."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Protocol

from backend.config import Settings
from backend.storage.workspaces import Workspaces
from backend.tools.python_coder.openinterpreter.install import worker_python
from backend.tools.sandbox.availability import SandboxStatus
from backend.tools.sandbox.cgroups import remove_stale
from backend.tools.sandbox.executor import BasePythonExecutor, ExecutorLimits, SandboxedExecutor

logger = logging.getLogger(__name__)

EXECUTOR_MODES = ("native", "openinterpreter")


def processes_of_this_user() -> int:
    # RLIMIT_NPROC counts every process of the real uid, not just the sandbox's.
    uid = os.getuid()
    return sum(1 for name in os.listdir("/proc") if name.isdigit() and _owner(name) == uid)


def _owner(pid: str) -> int:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1


def check_mode(mode: str) -> None:
    """PYTHON_EXECUTOR_MODE, never silently replaced by another mode."""
    if mode not in EXECUTOR_MODES:
        raise ValueError(f"PYTHON_EXECUTOR_MODE must be one of {', '.join(EXECUTOR_MODES)}")
    if mode == "openinterpreter":
        # Its code runs in this same sandbox; only the optional worker must be there.
        worker_python()  # raises ImportError naming `make openinterpreter`


class SessionExecutors(Protocol):
    """Where sessions' code runs: `ExecutorPool` here, or `RayExecutorPool` on a cluster."""

    def limits(self) -> ExecutorLimits: ...

    def get_python_executor(self, session_id: str) -> BasePythonExecutor: ...

    async def reap_idle(self, idle_seconds: float) -> int: ...

    async def close_all(self) -> None: ...


class ExecutorPool:
    def __init__(self, settings: Settings, sandbox: SandboxStatus, workspaces: Workspaces) -> None:
        self.settings = settings
        self.sandbox = sandbox
        self.workspaces = workspaces
        self._executors: dict[str, BasePythonExecutor] = {}
        if sandbox.isolated and (stale := remove_stale()):
            logger.info("Removed %d cgroups left by an earlier server", stale)

    def limits(self) -> ExecutorLimits:
        return ExecutorLimits(
            timeout=self.settings.PYTHON_CODE_TIMEOUT,
            max_memory_mb=self.settings.PYTHON_CODE_MAX_MEMORY,
            max_file_mb=self.settings.PYTHON_CODE_MAX_FILE_SIZE,
            max_processes=processes_of_this_user() + 256,
        )

    def get_python_executor(self, session_id: str) -> BasePythonExecutor:
        """The session's executor; never a silent fallback to another mode."""
        check_mode(self.settings.PYTHON_EXECUTOR_MODE)
        executor = self._executors.get(session_id)
        if executor is None:
            workspace = self.workspaces.ensure(session_id)
            executor = SandboxedExecutor(workspace, self.limits(), self.sandbox)
            self._executors[session_id] = executor
        return executor

    async def reap_idle(self, idle_seconds: float) -> int:
        """Stop workers idle longer than `idle_seconds`; their variables stay on disk."""
        now = time.monotonic()
        idle = [
            sid
            for sid, executor in self._executors.items()
            if isinstance(executor, SandboxedExecutor) and now - executor.last_used > idle_seconds
        ]
        for session_id in idle:
            await self._executors.pop(session_id).close()
        if idle:
            logger.info("Reaped %d idle sandbox workers", len(idle))
        return len(idle)

    async def close_all(self) -> None:
        executors, self._executors = list(self._executors.values()), {}
        await asyncio.gather(*(executor.close() for executor in executors))
