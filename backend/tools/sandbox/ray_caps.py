"""USER_MAX_SANDBOXES and HOST_MAX_SANDBOXES across a Ray cluster: the sandboxes' ledger.

Several API servers share the cluster and none of them keeps state, so the warm sandboxes
are counted in the cluster: one detached, named actor (`sandbox-ledger`, in the sessions'
namespace) records each session whose actor is warm, when it was last used and whether a
run is going on. Before each run, a server asks it to admit the session: the ledger decides
as the local pool does (`SandboxCaps.to_stop`), and answers the idle sessions to end first,
least recently used first, or a refusal (`SandboxRefused`, a 429) when every sandbox the
caps allow is running code. Its calls run one at a time, so two servers never both take
the last place.

The ledger only decides; the server ends the sessions it names
(`SessionSandbox.end_if_idle`, which declines if a run reached the actor meanwhile), and
their variables stay in S3. What it records is a hint that heals itself: before it ends
or refuses anything, it drops the sessions whose actor is no longer registered (lost with
its node, or ended without saying so); a run whose server died counts as busy no longer
than its time limit and a grace; a restarted ledger starts from the registered actors.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from backend.observability.metrics import SANDBOX_EVICTIONS
from backend.storage.sessions import SessionKey, check_key, owner_of, valid_key
from backend.tools.sandbox.admission import SandboxCaps, SandboxRefused
from backend.tools.sandbox.ray_pool import ACTOR_PREFIX, actor_name

if TYPE_CHECKING:
    from ray import ObjectRef
    from ray.actor import ActorHandle

logger = logging.getLogger(__name__)

LEDGER_NAME = "sandbox-ledger"
# Past a run's time limit, before a busy mark is no longer believed: the run's S3 pull and
# push, and a run of the same session queued behind it.
BUSY_GRACE = 60.0
# Seconds a server waits for the ledger (then it runs uncounted) or for an actor to end.
LEDGER_TIMEOUT = 10.0


@dataclass
class _Warm:
    last_used: float
    runs: int = 0  # admitted and not yet released
    busy_until: float = 0.0


@dataclass(frozen=True)
class _Seen:
    """A warm sandbox as `SandboxCaps.to_stop` sees it, at one instant."""

    last_used: float
    busy: bool


@dataclass(frozen=True)
class Admission:
    """The ledger's answer: the sessions to end first, or why none may start."""

    stop: list[SessionKey] = field(default_factory=list)
    refused: str | None = None
    retry_after: float = 0.0


class SandboxLedger:
    """The ledger actor's class (made remote by `ClusterCaps`): warm sandboxes by key."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.clock = time.monotonic
        now = self.clock()
        self.warm: dict[SessionKey, _Warm] = {key: _Warm(now) for key in self._registered()}

    def admit(self, key: SessionKey, user_max: int, host_max: int, run_seconds: float) -> Admission:
        """Count `key`'s run as busy and answer the sessions to end, or a refusal."""
        caps = SandboxCaps(host_max=host_max, user_max=lambda _: user_max, retry_after=run_seconds)
        try:
            stop = self._to_stop(caps, key)
        except SandboxRefused as refused:
            if key not in self.warm:
                return Admission(refused=refused.message, retry_after=refused.retry_after)
            stop = []  # already warm: its run starts no sandbox
        for other in stop:
            del self.warm[other]
        now = self.clock()
        entry = self.warm.setdefault(key, _Warm(now))
        entry.runs += 1
        entry.last_used = now
        entry.busy_until = now + run_seconds + BUSY_GRACE
        return Admission(stop=stop)

    def released(self, key: SessionKey) -> None:
        """`key`'s run ended, however: its sandbox is warm and idle (unless another runs)."""
        now = self.clock()
        entry = self.warm.setdefault(key, _Warm(now))
        entry.runs = max(entry.runs - 1, 0)
        entry.last_used = now

    def kept(self, key: SessionKey) -> None:
        """`key`'s actor declined to end (it was in use): count it again."""
        self.warm.setdefault(key, _Warm(self.clock()))

    def ended(self, key: SessionKey) -> None:
        """`key`'s actor ended (idle, or its session deleted), unless a run was admitted since."""
        entry = self.warm.get(key)
        if entry is not None and not self._busy(entry, self.clock()):
            del self.warm[key]

    def _to_stop(self, caps: SandboxCaps, key: SessionKey) -> list[SessionKey]:
        try:
            if not caps.to_stop(key, self._seen()):
                return []
        except SandboxRefused:
            pass
        self._drop_gone()  # before ending or refusing anything: what it counts is there
        return caps.to_stop(key, self._seen())

    def _seen(self) -> dict[SessionKey, _Seen]:
        now = self.clock()
        return {
            key: _Seen(entry.last_used, self._busy(entry, now)) for key, entry in self.warm.items()
        }

    @staticmethod
    def _busy(entry: _Warm, now: float) -> bool:
        return entry.runs > 0 and now < entry.busy_until

    def _drop_gone(self) -> None:
        """Forget idle sessions whose actor is no longer registered (a busy one's may be
        about to be created)."""
        registered = self._registered()
        now = self.clock()
        for key, entry in list(self.warm.items()):
            if key not in registered and not self._busy(entry, now):
                del self.warm[key]

    def _registered(self) -> set[SessionKey]:
        """The sessions with a sandbox actor in this namespace (dead ones are not listed)."""
        import ray

        entries = cast("list[dict[str, str]]", ray.util.list_named_actors(all_namespaces=True))
        keys = (
            entry["name"].removeprefix(ACTOR_PREFIX)
            for entry in entries
            if entry["namespace"] == self.namespace and entry["name"].startswith(ACTOR_PREFIX)
        )
        return {check_key(key) for key in keys if valid_key(key)}


class ClusterCaps:
    """A server's side of the ledger: admit a session before its run, end what the ledger
    names, and say when the run is over."""

    def __init__(self, namespace: str, caps: SandboxCaps) -> None:
        import ray

        self.namespace = namespace
        self.caps = caps
        options = ray.remote(SandboxLedger).options(
            name=LEDGER_NAME,
            namespace=namespace,
            lifetime="detached",  # it outlives the server that made it
            get_if_exists=True,
            max_restarts=-1,  # a lost node: it starts again from the registered actors
            max_task_retries=-1,  # and takes the calls it was given again
            num_cpus=0,
        )
        self.ledger = cast("ActorHandle[Any]", options.remote(namespace))

    async def admit(self, key: SessionKey) -> None:
        """Before `key`'s run: end the idle sandboxes the caps need, or `SandboxRefused`.

        Should the ledger not answer, the run goes ahead uncounted: bookkeeping never fails
        a run."""
        from ray.exceptions import RayError

        user_max = await asyncio.to_thread(self.caps.user_max, owner_of(key))  # the database
        reference: ObjectRef[Admission] = self.ledger.admit.remote(
            key, user_max, self.caps.host_max, self.caps.retry_after
        )
        try:
            answer: Admission = await asyncio.wait_for(reference, LEDGER_TIMEOUT)
        except (RayError, TimeoutError) as exc:
            logger.warning("session %s: the sandbox ledger did not answer: %s", key, exc)
            return
        if answer.refused is not None:
            raise SandboxRefused(answer.refused, answer.retry_after)
        if answer.stop:
            logger.info("Ending %d idle sandbox actor(s) to start another's", len(answer.stop))
            SANDBOX_EVICTIONS.labels("room").inc(len(answer.stop))
            await asyncio.gather(*(self._end(other) for other in answer.stop))

    async def _end(self, key: SessionKey) -> None:
        """End `key`'s actor unless it is in use; if so it is counted again."""
        import ray
        from ray.exceptions import RayActorError

        def find() -> ActorHandle[Any] | None:
            try:
                return ray.get_actor(actor_name(key), namespace=self.namespace)
            except ValueError:  # it has ended already
                return None

        actor = await asyncio.to_thread(find)
        if actor is None:
            return
        try:
            ended: bool = await asyncio.wait_for(actor.end_if_idle.remote(), LEDGER_TIMEOUT)
        except RayActorError:  # it ended (exit_actor), or was lost
            return
        except TimeoutError:  # its node is being lost: Ray will tell
            logger.warning("session %s: its actor did not answer; left running", key)
            return
        if not ended:  # a run reached it meanwhile
            self.ledger.kept.remote(key)

    async def released(self, key: SessionKey) -> None:
        """After `key`'s run, however it ended (sent at once, even if the caller is
        being cancelled)."""
        await self._told(key, self.ledger.released.remote(key))

    async def ended(self, key: SessionKey) -> None:
        """`key`'s actor was ended on purpose (its session deleted)."""
        await self._told(key, self.ledger.ended.remote(key))

    @staticmethod
    async def _told(key: SessionKey, reference: Any) -> None:
        from ray.exceptions import RayError

        try:
            await asyncio.wait_for(reference, LEDGER_TIMEOUT)
        except (RayError, TimeoutError) as exc:
            logger.warning("session %s: the sandbox ledger did not answer: %s", key, exc)
