"""A session's sandbox on a Ray node: the actor behind EXECUTOR_BACKEND=ray.

One named, detached actor per session owns the session's bubblewrap warm worker
(`SandboxedExecutor`) on whichever node Ray placed it. Its workspace is that node's
cache, `RAY_CACHE_DIR/<node id>/scratch/<session_id>`, reconciled with S3 around every
run: pull what the API servers pushed (uploads), run, push what the run wrote
(outputs, plots, the notepad, the persisted variables). A new or restarted actor
starts from what S3 holds, so losing a node loses nothing that a run had finished.

Ray is not a security boundary: the worker keeps its own network namespace, so code
in it reaches none of Ray's ports.

The API servers keep no state, so none of them can reap an idle actor: it ends itself
after `idle_seconds` without a run, killing its worker first, and tells the sandboxes'
ledger (`ray_caps`). A server that needs its place for another session under the caps
ends it sooner (`end_if_idle`), unless a run is going on or waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from backend.config import ConfigError
from backend.config.settings import SandboxMode
from backend.storage.mirror import WorkspaceMirror
from backend.storage.s3_objects import S3Config, S3Error
from backend.storage.sessions import SessionKey
from backend.storage.workspaces import Workspaces
from backend.tools.sandbox.availability import SandboxStatus, resolve_sandbox
from backend.tools.sandbox.executor import ExecutionResult, ExecutorLimits, SandboxedExecutor
from backend.tools.sandbox.ray_caps import LEDGER_NAME, LEDGER_TIMEOUT

logger = logging.getLogger(__name__)

# What `run` answers instead of a result when the actor is ending and did not run the code.
ENDING = "ending"
# Beside a result: whether the run's push changed S3 (if not, the API has nothing to pull).
PUSHED = "pushed"


@dataclass(frozen=True)
class MirrorSpec:
    """How the actor reaches its workspace's home in S3: a WorkspaceMirror's plain data."""

    config: S3Config
    location: str  # WORKSPACE_BUCKET: `bucket` or `bucket/prefix`
    multipart_threshold: int

    @classmethod
    def of(cls, mirror: WorkspaceMirror | None) -> MirrorSpec | None:
        if mirror is None:
            return None
        location = f"{mirror.bucket}/{mirror.prefix}" if mirror.prefix else mirror.bucket
        return cls(mirror.objects.config, location, mirror.objects.threshold)

    def mirror(self, manifest_dir: Path) -> WorkspaceMirror:
        return WorkspaceMirror(
            self.config,
            self.location,
            manifest_dir,
            multipart_threshold=self.multipart_threshold,
        )


@dataclass(frozen=True)
class ActorSpec:
    """What every session's actor is built with: plain values, pickled by Ray."""

    limits: ExecutorLimits
    sandbox: SandboxMode  # SANDBOX, decided on the node: bubblewrap must work there
    cache_dir: str  # RAY_CACHE_DIR
    idle_seconds: float  # SANDBOX_IDLE_SECONDS
    mirror: MirrorSpec | None  # None: the node shares the API's disk (tests of the mechanics)
    namespace: str  # RAY_NAMESPACE: where the sandboxes' ledger is


def failed(message: str) -> dict[str, Any]:
    return dataclasses.asdict(ExecutionResult(success=False, error=message))


class SessionSandbox:
    """The actor's class (made remote by the pool): one session's warm sandbox on a node."""

    def __init__(self, session_id: SessionKey, spec: ActorSpec) -> None:
        self.session_id = session_id
        self.spec = spec
        self.node_id: str = ray.get_runtime_context().get_node_id()
        root = Path(spec.cache_dir) / self.node_id
        self.workspaces = Workspaces(root)
        self.mirror = None if spec.mirror is None else spec.mirror.mirror(root / "manifests")
        self.last_used = time.monotonic()
        self._executor: SandboxedExecutor | None = None
        self._turn = asyncio.Lock()  # one run at a time, with its pull and push
        self._runs = 0  # runs going on or waiting for the turn
        self._ending = False
        self._stop_watching = threading.Event()
        # A thread, not a task: __init__ runs outside the actor's event loop, and a
        # restarted actor must end itself too, even if no run ever reaches it.
        threading.Thread(target=self._watch_idle, name="idle-watch", daemon=True).start()

    async def node(self) -> str:
        """The Ray node this actor runs on (for tests and operators)."""
        return self.node_id

    async def run(self, code: str, timeout: float | None) -> dict[str, Any]:  # noqa: ASYNC109
        """Pull, run `code`, push: an ExecutionResult as a dict with PUSHED, or {ENDING: True}."""
        self._runs += 1
        try:
            async with self._turn:
                if self._ending:
                    return {ENDING: True}  # not run: the caller asks the next actor
                self.last_used = time.monotonic()
                try:
                    return await self._run(code, timeout)
                finally:
                    self.last_used = time.monotonic()
        finally:
            self._runs -= 1

    async def _run(self, code: str, timeout: float | None) -> dict[str, Any]:  # noqa: ASYNC109
        workspace = await asyncio.to_thread(self.workspaces.ensure, self.session_id)
        if self.mirror is not None:
            try:
                await asyncio.to_thread(self.mirror.pull, self.session_id, workspace)
            except (S3Error, OSError) as exc:
                return failed(f"RuntimeError: the workspace could not be fetched from S3: {exc}")
        try:
            executor = await self._executor_for(workspace)
        except (ConfigError, RuntimeError) as exc:
            return failed(f"RuntimeError: no sandbox on Ray node {self.node_id[:12]}: {exc}")
        result = await executor.run(code, timeout)
        pushed = False
        if self.mirror is not None:
            try:
                report = await asyncio.to_thread(self.mirror.push, self.session_id, workspace)
                pushed = bool(report.uploaded or report.deleted)
            except (S3Error, OSError) as exc:
                # The run happened; what it wrote waits here and goes with the next push.
                logger.warning("session %s: push to S3 failed: %s", self.session_id, exc)
                result.stderr += (
                    f"\n[warning: the workspace could not be saved to S3 ({exc}); "
                    "it is saved after the next run]\n"
                )
        return dataclasses.asdict(result) | {PUSHED: pushed}

    async def _executor_for(self, workspace: Path) -> SandboxedExecutor:
        if self._executor is None:
            status = await asyncio.to_thread(resolve_sandbox, self.spec.sandbox)
            if status.mode == "unavailable":
                raise RuntimeError(status.detail)
            self._executor = self._build(workspace, status)
        return self._executor

    def _build(self, workspace: Path, status: SandboxStatus) -> SandboxedExecutor:
        return SandboxedExecutor(workspace, self.spec.limits, status)

    async def exit_if_idle(self) -> bool:
        """End this actor if no run came for `idle_seconds`, its worker killed first.

        Called by the idle watcher through the actor's own handle: `exit_actor` ends an
        async actor only from inside one of its methods. Returns False if still in use.
        """
        async with self._turn:
            if time.monotonic() - self.last_used < self.spec.idle_seconds:
                return False
            await self._stop()
        await self._tell_ledger()
        logger.info("session %s: idle, ending its sandbox actor", self.session_id)
        ray.actor.exit_actor()  # type: ignore[no-untyped-call]
        return True  # not reached: exit_actor raises

    async def end_if_idle(self) -> bool:
        """End this actor now, its worker killed first, unless a run is going on or waiting
        (then False): a server needs its place under the sandbox caps. It never waits for
        a run, and the ledger has already dropped it."""
        if self._runs or self._turn.locked():
            return False
        async with self._turn:  # free, and nobody waits: taken at once
            await self._stop()
        logger.info("session %s: ending its sandbox actor for another's", self.session_id)
        ray.actor.exit_actor()  # type: ignore[no-untyped-call]
        return True  # not reached: exit_actor raises

    async def _stop(self) -> None:
        """Take no more runs (those waiting answer ENDING, unrun), and kill the worker."""
        self._ending = True
        self._stop_watching.set()
        if self._executor is not None:
            await self._executor.close()

    async def _tell_ledger(self) -> None:
        """The ledger forgets this session (if it can be reached: it heals without)."""
        with contextlib.suppress(ValueError, ray.exceptions.RayError, TimeoutError):
            ledger = await asyncio.to_thread(
                ray.get_actor, LEDGER_NAME, namespace=self.spec.namespace
            )
            await asyncio.wait_for(ledger.ended.remote(self.session_id), LEDGER_TIMEOUT)

    def _watch_idle(self) -> None:
        handle = ray.get_runtime_context().current_actor
        period = max(min(self.spec.idle_seconds / 4, 60.0), 0.05)
        while not self._stop_watching.wait(period):
            if time.monotonic() - self.last_used >= self.spec.idle_seconds:
                try:
                    ray.get(handle.exit_if_idle.remote())
                except ray.exceptions.RayActorError:
                    return  # it ended
