"""Executors run code for one session; `native` keeps a warm sandboxed worker.

The worker (see `worker.py`) holds the session's variables and forks per run, so
a run costs a fork, and a failed run leaves the variables as they were. This
side adds the outer guard: if the sandbox stops answering, the whole sandbox
gets SIGKILL and the next run starts a fresh one from the persisted variables.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import sys
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from backend.observability.metrics import SANDBOX_OOM_KILLS, SANDBOX_RUN_SECONDS, SANDBOX_RUNS
from backend.storage.sessions import SessionKey
from backend.storage.workspaces import listable_name
from backend.tools.sandbox.availability import SandboxStatus
from backend.tools.sandbox.cgroups import SandboxCgroup, cgroup_name
from backend.tools.sandbox.command import (
    SANDBOX_DATA,
    SANDBOX_WORKSPACE,
    WORKER_DIR,
    bwrap_command,
)
from backend.tools.sandbox.data_channel import SOCKET_NAME
from backend.tools.sandbox.start_failure import SandboxStartError, StderrTail, short_reason
from backend.tools.sandbox.table_result import TablePreview, parse_tables

logger = logging.getLogger(__name__)

_START_TIMEOUT = 120.0  # the first start imports pandas and matplotlib
OUTER_GRACE = 10.0  # past the run timeout, before we stop trusting the sandbox


@dataclass
class ExecutionResult:
    success: bool
    stdout: str = ""
    stderr: str = ""
    error: str | None = None
    files: list[str] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    variables: list[dict[str, Any]] = field(default_factory=list)
    tables: list[TablePreview] = field(default_factory=list)  # what the run showed as tables
    truncated: bool = False
    execution_time: float = 0.0  # wall seconds
    cpu_time: float = 0.0  # CPU seconds the run used; its wall time if it was stopped


# Told of every run of a session (its key) as it ends: the user's usage (core/usage.py).
RunObserver = Callable[[SessionKey, "ExecutionResult"], None]


@dataclass(frozen=True)
class ExecutorLimits:
    timeout: float
    max_memory_mb: int
    max_file_mb: float
    max_processes: int = 128  # the whole sandbox's (SANDBOX_MAX_PROCESSES)


def _processes_of_this_user() -> int:
    uid = os.getuid()
    return sum(1 for name in os.listdir("/proc") if name.isdigit() and _owner(name) == uid)


def _owner(pid: str) -> int:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1


def _counted_per_namespace() -> bool:
    """Whether RLIMIT_NPROC counts the processes of one user namespace (Linux 5.14+)."""
    try:
        major, minor = (int(part) for part in os.uname().release.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (5, 14)


def process_rlimit(max_processes: int) -> int:
    """RLIMIT_NPROC for a sandbox of at most `max_processes` processes.

    It was relative (the uid's processes when the sandbox started + 256), which was
    wrong both ways. Since Linux 5.14 the count is per user namespace, and every
    sandbox has its own: a relative limit let a sandbox grow with whatever the rest of
    the host ran, including another sandbox's fork bomb at its peak, so nothing bound
    it. Before 5.14 the count is the uid's over the whole host, shared by every
    sandbox and the server: one sandbox's bomb used up the headroom of all the others.
    There an absolute limit would stop every fork, so the relative one stays as a
    backstop and the cgroup's pids.max is what keeps sandboxes apart.
    """
    if _counted_per_namespace():
        return max_processes
    return _processes_of_this_user() + max_processes


def _text(value: str) -> str:
    """Text the sandbox produced, with lone surrogates (undecodable bytes) made visible."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def _answers(response: Any, request: dict[str, Any]) -> bool:
    return (
        isinstance(response, dict)
        and response.get("id") == request["id"]
        and isinstance(response.get("ok"), bool)
    )


class BasePythonExecutor(ABC):
    """Runs code for one session, keeping its variables between runs."""

    @abstractmethod
    async def run(self, code: str, timeout: float | None = None) -> ExecutionResult:  # noqa: ASYNC109
        """Run `code`; `timeout` (seconds) is capped by PYTHON_CODE_TIMEOUT."""

    @abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def reported_cpu(value: object, wall: float) -> float:
    """The CPU seconds a run says it used. Its own code could have forged the number, so it
    is only informational (the daily limit counts wall time, measured by the server): a
    finite number between 0 and the wall time on every core, else the wall time."""
    ceiling = wall * (os.cpu_count() or 1)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return wall
    return min(max(float(value), 0.0), ceiling)


def observe_run(result: ExecutionResult) -> None:
    """A run in the metrics, by outcome: ok, error, timeout, restarted (the sandbox stopped
    answering), refused (it could not start)."""
    error = result.error or ""
    if result.success:
        outcome = "ok"
    elif error.startswith("TimeoutError"):
        outcome = "timeout"
    elif error.startswith("RuntimeError: the sandbox stopped answering"):
        outcome = "restarted"
    elif error.startswith("RuntimeError") and error.endswith("Try again shortly."):
        outcome = "refused"
    else:
        outcome = "error"
    SANDBOX_RUNS.labels(outcome).inc()
    SANDBOX_RUN_SECONDS.observe(result.execution_time)


class SandboxedExecutor(BasePythonExecutor):
    """The `native` mode: a warm worker per session, inside bubblewrap."""

    def __init__(
        self,
        workspace: Path,
        limits: ExecutorLimits,
        sandbox: SandboxStatus,
        before_start: Callable[[], Awaitable[None]] | None = None,
        after_run: Callable[[ExecutionResult], None] | None = None,
        *,
        measured: bool = True,
    ) -> None:
        """`before_start` runs before each (re)start of the worker: the pool's caps, which
        may stop other sandboxes or refuse (and so fail the run) with `SandboxRefused`.
        `measured`: its runs count in the metrics (not the server's own start-up check)."""
        if sandbox.mode == "unavailable":
            raise RuntimeError(f"Code execution is off: {sandbox.detail}")
        # Absolute: the worker starts in it, and finds it again by this name.
        self.workspace = workspace.absolute()
        self.limits = limits
        self.sandbox = sandbox
        self.last_used = time.monotonic()
        self.restored: list[str] = []
        self._process: asyncio.subprocess.Process | None = None
        self._stderr: StderrTail | None = None  # the running sandbox's error output
        self._starting = False
        self._lock = asyncio.Lock()
        self.before_start = before_start
        self.after_run = after_run  # each run's result, as it ends (the user's usage)
        # Held while a run goes on: the pool's share of its owner's disk quota.
        self.room: Callable[[], AbstractAsyncContextManager[None]] | None = None
        # The data source socket's folder, and what answers it while a run goes on.
        self.data_folder: Path | None = None
        self.data_channel: Callable[[], AbstractAsyncContextManager[None]] | None = None
        self.measured = measured
        self.memory_cgroup = False  # whether a cgroup bounds the running sandbox's memory
        # The whole sandbox's budget: the zygote, a run and whatever the run forks.
        self.cgroup = SandboxCgroup(
            cgroup_name(f"{workspace.name}-{uuid.uuid4().hex[:8]}"),
            memory_bytes=(2 * limits.max_memory_mb + 256) * 1024 * 1024,
            max_pids=limits.max_processes,
        )

    @property
    def warm(self) -> bool:
        """Whether a worker is running (or starting): what the pool's caps count."""
        return self._starting or (self._process is not None and self._process.returncode is None)

    @property
    def busy(self) -> bool:
        """Running code, starting or stopping: not to be stopped for another sandbox."""
        return self._lock.locked()

    def _command(self) -> tuple[list[str], dict[str, str], str]:
        self.memory_cgroup = False
        if self.sandbox.isolated:
            command = bwrap_command(self.workspace, self.data_folder)
            # (Re)create the cgroups on every start: a restart must not lose its budget.
            if self.cgroup.create():  # join them first, then become bwrap (same pid)
                self.memory_cgroup = True
                joins = " && ".join(f'echo $$ > "{procs}"' for procs in self.cgroup.procs_files())
                command = ["/bin/sh", "-c", f'{joins} && exec "$@"', "sandbox", *command]
            else:
                logger.warning("cgroups are not writable here: sandboxes have rlimits only")
            return command, {}, str(self.workspace)
        # SANDBOX=none, chosen explicitly: the same worker, without isolation.
        environment = {"PATH": "/usr/bin:/bin", "HOME": str(self.workspace), "MPLBACKEND": "Agg"}
        return (
            [sys.executable, "-I", str(WORKER_DIR / "worker.py")],
            environment,
            str(self.workspace),
        )

    def _data_socket(self) -> str:
        """Where the run finds the data source socket; "" for none."""
        if self.data_folder is None:
            return ""
        if self.sandbox.isolated:
            return f"{SANDBOX_DATA}/{SOCKET_NAME}"
        return str(self.data_folder / SOCKET_NAME)

    async def _start(self) -> asyncio.subprocess.Process:
        command, environment, cwd = self._command()
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,  # bwrap's own errors, then the worker's
            cwd=cwd,
            env=environment,
            start_new_session=True,
            limit=16 * 1024 * 1024,
        )
        config = {
            "workspace": SANDBOX_WORKSPACE if self.sandbox.isolated else str(self.workspace),
            "isolated": self.sandbox.isolated,
            "max_timeout": self.limits.timeout,
            "max_memory_mb": self.limits.max_memory_mb,
            "max_file_mb": self.limits.max_file_mb,
            "max_processes": process_rlimit(self.limits.max_processes),
            # With a cgroup bounding memory, address space is only a backstop (cell.py).
            "memory_cgroup": self.memory_cgroup,
            "data_socket": self._data_socket(),
        }
        assert process.stdin is not None and process.stdout is not None
        if self._stderr is not None:
            self._stderr.close()
        stderr = self._stderr = StderrTail(process.stderr)
        try:
            process.stdin.write(json.dumps(config).encode() + b"\n")
            await process.stdin.drain()
            hello = json.loads(await asyncio.wait_for(process.stdout.readline(), _START_TIMEOUT))
        # It exited (a closed pipe: ConnectionError, or uvloop's RuntimeError), or never answered.
        except (TimeoutError, ValueError, ConnectionError, RuntimeError):
            hello = None
        except BaseException:  # cancelled while starting: no half-started sandbox is left
            self._kill(process)
            stderr.close()
            raise
        if not isinstance(hello, dict) or not hello.get("ready"):
            await self._discard(process)
            raise await self._start_error(process, stderr, hello)
        self.restored = hello.get("restored", [])
        for problem in hello.get("problems", []):
            logger.warning("Could not restore variable %s", problem)
        return process

    @staticmethod
    async def _start_error(
        process: asyncio.subprocess.Process, stderr: StderrTail, hello: object
    ) -> SandboxStartError:
        """Why a sandbox did not start, from what it wrote to stderr (bubblewrap's own
        message, or the worker's traceback); its exit status or silence if nothing."""
        output = await stderr.text()
        stderr.close()
        if isinstance(hello, dict):
            reason = "its Python worker failed to start"
        elif process.returncode is not None and process.returncode >= 0:
            reason = f"it exited with status {process.returncode}"
        else:
            reason = f"it did not answer within {_START_TIMEOUT:.0f} s"
        return SandboxStartError(short_reason(output) or reason, output)

    async def _discard(self, process: asyncio.subprocess.Process) -> None:
        """Kill a worker that never became ready, and reap it (no zombie, no open pipe)."""
        self._kill(process)
        await process.wait()

    async def _started(self) -> asyncio.subprocess.Process:
        self._starting = True  # counted by the caps from now: the others see it
        try:
            if self.before_start is not None:
                await self.before_start()
            return await self._start()
        finally:
            self._starting = False

    @staticmethod
    def _stale(process: asyncio.subprocess.Process) -> bool:
        """A process whose pipes are gone: it died, or its transport failed."""
        return process.returncode is not None or process.stdin is None or process.stdin.is_closing()

    @staticmethod
    def _kill(process: asyncio.subprocess.Process) -> None:
        """SIGKILL the whole sandbox: bwrap's session, and with it the pid namespace."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    async def run(self, code: str, timeout: float | None = None) -> ExecutionResult:  # noqa: ASYNC109
        result = await self._run(code, timeout)
        if self.measured:
            observe_run(result)
        if self.after_run is not None:
            self.after_run(result)
        return result

    async def start(self) -> None:
        """Start the worker now unless it runs; `SandboxStartError` (its stderr kept) or
        the caps' refusal says why it could not."""
        async with self._lock:
            await self._running()

    async def _running(self) -> asyncio.subprocess.Process:
        """The running worker, started (again) if need be; called holding the lock."""
        process = self._process
        if process is None or self._stale(process):
            if process is not None:  # nothing was sent yet: safe to start over
                self._kill(process)
                await process.wait()
                self._process = None
            process = self._process = await self._started()
        return process

    async def _run(self, code: str, timeout: float | None) -> ExecutionResult:  # noqa: ASYNC109
        timeout = min(timeout or self.limits.timeout, self.limits.timeout)
        async with self._lock:
            self.last_used = time.monotonic()
            try:
                process = await self._running()
            except RuntimeError as exc:  # the caller gets a failed run, never a crash
                if isinstance(exc, SandboxStartError):  # bwrap's (or the worker's) own words
                    logger.error("%s Its error output: %s", exc, exc.stderr or "(nothing)")
                else:
                    logger.error("A sandbox did not start: %s", exc)
                return ExecutionResult(
                    success=False, error=f"RuntimeError: {exc} Try again shortly."
                )
            assert process.stdin is not None and process.stdout is not None
            oom_kills = self.cgroup.oom_kills() if self.memory_cgroup else 0
            request = {"id": uuid.uuid4().hex[:12], "code": code, "timeout": timeout}
            started = time.monotonic()
            try:
                async with (
                    self.room() if self.room else contextlib.nullcontext(),
                    self.data_channel() if self.data_channel else contextlib.nullcontext(),
                ):
                    started = time.monotonic()  # the room's walk is the server's, not the run's
                    process.stdin.write(json.dumps(request).encode() + b"\n")
                    await process.stdin.drain()
                    line = await asyncio.wait_for(process.stdout.readline(), timeout + OUTER_GRACE)
                response = json.loads(line)
                if not _answers(response, request):
                    raise ValueError("the sandbox answered out of turn")
            except asyncio.CancelledError:
                # The caller went away mid-run (a client disconnect). The run's reply would
                # reach the next request, so this sandbox is done; the variables persist.
                self._kill(process)
                self._process = None
                raise
            except (TimeoutError, ValueError, ConnectionError, RuntimeError):
                self._kill(process)
                await process.wait()
                self._process = None
                if self._stderr is not None:
                    said = await self._stderr.text() or "(nothing)"
                    logger.warning("A sandbox stopped answering; its error output: %s", said)
                wall = time.monotonic() - started
                return ExecutionResult(
                    success=False,
                    error="RuntimeError: the sandbox stopped answering and was restarted; "
                    "variables are as after the last successful run.",
                    execution_time=wall,
                    cpu_time=wall,  # what it used is unknown: counted as busy throughout
                )
            finally:
                self.last_used = time.monotonic()
                if self.memory_cgroup:
                    killed = self.cgroup.oom_kills() - oom_kills
                    if killed > 0:
                        SANDBOX_OOM_KILLS.inc(killed)
        wall = time.monotonic() - started  # measured here: nothing in the sandbox can alter it
        error = response.get("error")
        return ExecutionResult(
            success=response["ok"],
            stdout=_text(response.get("stdout", "")),
            stderr=_text(response.get("stderr", "")),
            error=None if error is None else _text(error),
            # A name the API cannot carry (undecodable bytes, a backslash) is left out.
            files=[name for name in response.get("files", []) if listable_name(name)],
            figures=[name for name in response.get("figures", []) if listable_name(name)],
            variables=response.get("variables", []),
            tables=parse_tables(response.get("tables"), str(request["id"])),
            truncated=response.get("truncated", False),
            execution_time=wall,
            cpu_time=reported_cpu(response.get("cpu"), wall),
        )

    async def close(self) -> None:
        async with self._lock:
            if self._process is not None and self._process.returncode is None:
                self._kill(self._process)
                await self._process.wait()
            self._process = None
            if self._stderr is not None:
                self._stderr.close()
                self._stderr = None
            for _ in range(50):  # the pid namespace takes a moment to empty
                self.cgroup.remove()
                if not self.cgroup.folders:
                    break
                await asyncio.sleep(0.02)
