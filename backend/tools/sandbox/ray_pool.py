"""EXECUTOR_BACKEND=ray: each session's sandbox is a named, detached Ray actor.

`RayExecutorPool` has `ExecutorPool`'s interface but keeps nothing per session: the
executor it hands out finds the session's actor by name (creating it where it is
missing) for every run, so any API server serves any session, and one that restarts
has lost nothing. A run goes: push this server's copy of the workspace to S3 (new
uploads), the actor's run (pull, run, push), then, if the run changed anything, pull
it, so the plots and outputs are here for the UI.

A run is never retried once it may have started: code is not idempotent. If the
actor's node is lost mid-run, the run fails with a clear message, and Ray restarts
the actor on another node, which starts from the variables in S3. Runs during the
few seconds Ray takes to notice a lost node fail the same way.

USER_MAX_SANDBOXES and HOST_MAX_SANDBOXES hold for the whole cluster: before each run the
pool asks the cluster's ledger (`ray_caps`) to admit the session, ends the idle actors it
names, or raises its refusal (`SandboxRefused`, the local pool's 429).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from backend.config import ConfigError, Settings
from backend.storage.mirror import WorkspaceMirror
from backend.storage.s3_objects import S3Error
from backend.storage.sessions import SessionKey, check_key
from backend.storage.workspaces import Workspaces
from backend.tools.sandbox.admission import SandboxCaps
from backend.tools.sandbox.executor import (
    OUTER_GRACE,
    BasePythonExecutor,
    ExecutionResult,
    ExecutorLimits,
    RunObserver,
    observe_run,
)
from backend.tools.sandbox.pool import check_mode, host_max_sandboxes

if TYPE_CHECKING:
    from ray import ObjectRef
    from ray.actor import ActorClass, ActorHandle

    from backend.tools.sandbox.ray_caps import ClusterCaps

logger = logging.getLogger(__name__)

ACTOR_PREFIX = "sandbox-"
# A sliver of a CPU per sandbox: it keeps them off nodes started with --num-cpus=0 (Ray's
# advice for a head node), and 100 fit on each CPU, which Ray only counts, never enforces.
ACTOR_CPUS = 0.01
CONNECT_TIMEOUT = 5.0  # seconds to reach RAY_ADDRESS before start-up gives up
ATTEMPTS = 6  # tries while an actor that is ending (idle) hands its name over
RETRY_WAIT = 0.05  # seconds before the second try, doubling after
NODE_LOST = (
    "RuntimeError: the node running this session's sandbox was lost; "
    "variables are as after the last successful run."
)
# How Ray 2.60 words the death of an actor that ended itself (exit_actor): such an
# actor took no run after deciding to end (see SessionSandbox.exit_if_idle).
_ENDED_ON_PURPOSE = "Worker exit type: INTENDED_USER_EXIT"


def actor_name(session_id: SessionKey) -> str:
    return ACTOR_PREFIX + check_key(session_id)


def connect(address: str, namespace: str) -> None:
    """Join the Ray cluster at `address` as a driver, once per process.

    Raises a one-line `ConfigError` naming the setting when Ray is missing, RAY_ADDRESS
    is empty, or the cluster cannot be reached.
    """
    if not address.strip():
        raise ConfigError(
            "RAY_ADDRESS: EXECUTOR_BACKEND=ray needs the address of a Ray cluster's head "
            "(host:port of its GCS, e.g. 10.0.0.5:6379)"
        )
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "EXECUTOR_BACKEND=ray: Ray is not installed; "
            "install it with `pip install -r requirements-ray.txt`"
        ) from None
    if ray.is_initialized():  # one driver per process: a second pool shares it
        return
    if address.startswith("ray://"):
        raise ConfigError(
            "RAY_ADDRESS: ray:// (Ray Client) is not supported; give the head's GCS "
            "address, host:port"
        )
    if address != "auto":
        _reachable(address)
    try:
        ray.init(
            address=address,
            namespace=namespace,
            logging_level=logging.WARNING,
            log_to_driver=False,  # the sandboxes' output comes back in results, not logs
        )
    except Exception as exc:  # at start-up any failure is one line, never a trace
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"RAY_ADDRESS: cannot join the Ray cluster at {address}: {first}"
        ) from None


def _reachable(address: str) -> None:
    """Fail fast on an address nothing answers at: ray.init would retry for minutes."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"RAY_ADDRESS: {address!r} is not host:port")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT).close()
    except OSError as exc:
        raise ConfigError(
            f"RAY_ADDRESS: the Ray cluster at {address} cannot be reached: {exc.strerror or exc}"
        ) from None


class RayExecutorPool:
    """ExecutorPool's interface over Ray actors; holds no per-session state."""

    def __init__(
        self,
        settings: Settings,
        workspaces: Workspaces,
        mirror: WorkspaceMirror | None,
        max_sandboxes: Callable[[int], int] | None = None,
    ) -> None:
        """`max_sandboxes(user id)`: that user's cap (default: USER_MAX_SANDBOXES for all)."""
        if settings.SANDBOX == "none":
            # Unisolated code on a node reaches Ray's ports, and through them every node.
            raise ConfigError(
                "SANDBOX: none is refused with EXECUTOR_BACKEND=ray: code outside bubblewrap "
                "could reach Ray's ports and run anything on any node; use auto or bwrap"
            )
        connect(settings.RAY_ADDRESS, settings.RAY_NAMESPACE)
        import ray

        from backend.tools.sandbox.ray_actor import ActorSpec, MirrorSpec, SessionSandbox
        from backend.tools.sandbox.ray_caps import ClusterCaps

        self.settings = settings
        self.workspaces = workspaces
        self.mirror = mirror
        self.namespace = settings.RAY_NAMESPACE
        self.spec = ActorSpec(
            limits=self.limits(),
            sandbox=settings.SANDBOX,
            cache_dir=str(settings.RAY_CACHE_DIR),
            idle_seconds=settings.SANDBOX_IDLE_SECONDS,
            mirror=MirrorSpec.of(mirror),
            namespace=self.namespace,
        )
        self._actor_class: ActorClass[Any] = ray.remote(SessionSandbox)
        self.caps: ClusterCaps = ClusterCaps(
            self.namespace,
            SandboxCaps(
                host_max=host_max_sandboxes(settings),
                user_max=max_sandboxes or (lambda _: settings.USER_MAX_SANDBOXES),
                retry_after=settings.PYTHON_CODE_TIMEOUT + OUTER_GRACE,
            ),
        )
        self.on_run: RunObserver | None = None

    def limits(self) -> ExecutorLimits:
        """The limits each actor applies (the process limit is absolute, as here)."""
        return ExecutorLimits(
            timeout=self.settings.PYTHON_CODE_TIMEOUT,
            max_memory_mb=self.settings.PYTHON_CODE_MAX_MEMORY,
            max_file_mb=self.settings.PYTHON_CODE_MAX_FILE_SIZE,
            max_processes=self.settings.SANDBOX_MAX_PROCESSES,
        )

    def get_python_executor(self, session_id: SessionKey) -> BasePythonExecutor:
        """A proxy to the session's actor; never a silent fallback to another mode."""
        check_mode(self.settings.PYTHON_EXECUTOR_MODE)
        return RayExecutor(self, session_id)

    def actor(self, session_id: SessionKey) -> ActorHandle[Any]:
        """The session's actor, created if there is none (sessions are spread over nodes)."""
        options = self._actor_class.options(
            name=actor_name(session_id),
            namespace=self.namespace,
            lifetime="detached",  # it outlives the server that made it
            get_if_exists=True,
            max_restarts=-1,  # a lost node: Ray starts it again elsewhere, from S3
            max_task_retries=0,  # but never runs code again on its own
            num_cpus=ACTOR_CPUS,
            scheduling_strategy="SPREAD",
        )
        return cast("ActorHandle[Any]", options.remote(session_id, self.spec))

    def warm_count(self) -> int:
        """0: the actors are the cluster's, not this server's (Ray's own metrics count them)."""
        return 0

    async def reap_idle(self, idle_seconds: float) -> int:
        """Nothing to do here: each actor ends itself after SANDBOX_IDLE_SECONDS (and tells
        the ledger), since no server keeps a list of them."""
        return 0

    async def close_all(self) -> None:
        """Nothing to close: the actors belong to the sessions and outlive this server."""

    async def discard(self, session_id: SessionKey) -> None:
        """End the session's actor, wherever it runs (a deleted session)."""
        import ray  # only with EXECUTOR_BACKEND=ray

        def kill() -> None:
            try:
                actor = ray.get_actor(actor_name(session_id), namespace=self.namespace)
            except ValueError:  # none is running
                return
            ray.kill(actor, no_restart=True)

        await asyncio.to_thread(kill)
        await self.caps.ended(session_id)


class RayExecutor(BasePythonExecutor):
    """Routes one session's runs to its actor; as stateless as the pool."""

    def __init__(self, pool: RayExecutorPool, session_id: SessionKey) -> None:
        self.pool = pool
        self.session_id = session_id

    async def run(self, code: str, timeout: float | None = None) -> ExecutionResult:  # noqa: ASYNC109
        result = await self._run(code, timeout)
        observe_run(result)
        if self.pool.on_run is not None:
            self.pool.on_run(self.session_id, result)
        return result

    async def _run(self, code: str, timeout: float | None) -> ExecutionResult:  # noqa: ASYNC109
        from backend.tools.sandbox.ray_actor import PUSHED  # Ray is imported only when used

        started = time.monotonic()
        mirror = self.pool.mirror
        local = self.pool.workspaces.ensure(self.session_id)
        await self.pool.caps.admit(self.session_id)  # or SandboxRefused: the caps are full
        try:
            answer = await self._pushed_and_run(local, code, timeout)
        finally:  # however the run ended, cancelled too: its sandbox is idle
            await self.pool.caps.released(self.session_id)
        if isinstance(answer, str):
            return _failed(answer, started)
        pushed = answer.pop(PUSHED, False)
        if mirror is not None and pushed:  # what the run wrote, for the UI
            try:
                await asyncio.to_thread(mirror.pull, self.session_id, local)
            except (S3Error, OSError) as exc:  # the next listing pulls again
                logger.warning("session %s: pull from S3 failed: %s", self.session_id, exc)
        return ExecutionResult(**answer)

    async def _pushed_and_run(
        self,
        local: Path,
        code: str,
        timeout: float | None,  # noqa: ASYNC109
    ) -> dict[str, Any] | str:
        """This server's copy of the workspace sent to S3, then the actor's answer."""
        if self.pool.mirror is not None:
            try:
                await asyncio.to_thread(self.pool.mirror.push, self.session_id, local)
            except (S3Error, OSError) as exc:
                return f"RuntimeError: the workspace could not be sent to S3: {exc}"
        return await self._answer(code, timeout)

    async def _answer(self, code: str, timeout: float | None) -> dict[str, Any] | str:  # noqa: ASYNC109
        """The actor's answer (an ExecutionResult's fields and PUSHED), or why none came."""
        from ray.exceptions import ActorDiedError, RayActorError, RayError

        from backend.tools.sandbox.ray_actor import ENDING

        for attempt in range(ATTEMPTS):
            if attempt:  # the last actor was ending: let Ray release its name
                await asyncio.sleep(RETRY_WAIT * 2 ** (attempt - 1))
            reference: ObjectRef[dict[str, Any]] = self.pool.actor(self.session_id).run.remote(
                code, timeout
            )
            try:
                answer: dict[str, Any] = await reference
            except asyncio.CancelledError:
                import ray

                ray.cancel(reference)  # the actor's run is cancelled: it kills its worker
                raise
            except ActorDiedError as exc:
                if exc.actor_init_failed:
                    logger.error(
                        "session %s: sandbox actor did not start: %s", self.session_id, exc
                    )
                    return "RuntimeError: the sandbox's actor failed to start; see the server log."
                if _ENDED_ON_PURPOSE in str(exc):
                    logger.info("session %s: its actor ended while idle; next", self.session_id)
                    continue  # it ended itself while idle, before taking this run
                logger.warning("session %s: sandbox actor lost: %s", self.session_id, exc)
                return NODE_LOST
            except RayActorError as exc:  # unavailable: its node is gone or unreachable
                logger.warning("session %s: sandbox actor lost: %s", self.session_id, exc)
                return NODE_LOST
            except RayError as exc:
                logger.error("session %s: sandbox actor failed: %s", self.session_id, exc)
                return "RuntimeError: the sandbox's actor failed; see the server log."
            if not answer.pop(ENDING, False):
                return answer
            # It was ending and did not run the code: its successor will.
            logger.info("session %s: its actor was ending; next", self.session_id)
        return "RuntimeError: the session's sandbox kept ending; try again."

    async def close(self) -> None:
        """Nothing held here: the actor ends itself when idle."""


def _failed(message: str, started: float) -> ExecutionResult:
    return ExecutionResult(success=False, error=message, execution_time=time.monotonic() - started)
