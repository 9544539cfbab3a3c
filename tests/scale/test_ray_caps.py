"""USER_MAX_SANDBOXES and HOST_MAX_SANDBOXES on a real 2-node Ray cluster, with two API
servers' pools on it: the caps hold across the servers (the ledger actor, `ray_caps`), an
idle actor past them is ended and its variables come back from S3, and when every one
the caps allow is running code the next is refused as on one machine."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
import ray

from backend.storage.sessions import owner_of
from backend.tools.sandbox.admission import SandboxRefused
from backend.tools.sandbox.executor import ExecutionResult
from backend.tools.sandbox.ray_caps import BUSY_GRACE, SandboxLedger
from backend.tools.sandbox.ray_pool import ACTOR_PREFIX, RayExecutorPool
from tests.scale.conftest import MakePool
from tests.support.seaweedfs import S3Server
from tests.support.waiting import wait_for

USER_SANDBOXES = 2
HOST_SANDBOXES = 3
START_SECONDS = 120  # a cold worker imports pandas, on a busy machine
# Runs until the test writes outputs/release in the session's workspace on its node.
HELD = (
    "import os, time\nopen('outputs/started', 'w').close()\n"
    "while not os.path.exists('outputs/release'): time.sleep(0.02)\nprint('released')"
)


@pytest.fixture
def pools(
    make_pool: MakePool, s3_server: S3Server, workspace_bucket: str
) -> tuple[RayExecutorPool, RayExecutorPool]:
    """Two API servers' pools on one cluster and namespace (a fresh one: a ledger of its own)."""
    namespace = f"caps-{uuid.uuid4().hex[:8]}"
    made = [
        make_pool(
            s3=(s3_server, workspace_bucket),
            RAY_NAMESPACE=namespace,
            USER_MAX_SANDBOXES=str(USER_SANDBOXES),
            HOST_MAX_SANDBOXES=str(HOST_SANDBOXES),
            PYTHON_CODE_TIMEOUT="120",
        )
        for _ in range(2)
    ]
    return made[0], made[1]


def key(user: int, name: str) -> str:
    """A fresh session of `user` (the bucket is the module's: no two tests share a key)."""
    return f"u{user}-{name}-{uuid.uuid4().hex[:8]}"


def sandboxes(pool: RayExecutorPool, user: int | None = None) -> set[str]:
    """The sessions (of `user`) with a sandbox actor in the pool's namespace."""
    found = ray.util.list_named_actors(all_namespaces=True)
    keys = {
        entry["name"].removeprefix(ACTOR_PREFIX)
        for entry in found
        if entry["namespace"] == pool.namespace and entry["name"].startswith(ACTOR_PREFIX + "u")
    }
    return {k for k in keys if user is None or owner_of(k) == user}


def on_node(pool: RayExecutorPool, session: str, name: str) -> list[Path]:
    """outputs/<name> in the session's workspace, on whichever node holds it."""
    return list(pool.settings.RAY_CACHE_DIR.glob(f"*/scratch/{session}/outputs/{name}"))


async def ran(pool: RayExecutorPool, session: str, code: str) -> str:
    result = await pool.get_python_executor(session).run(code)
    assert result.success, result
    return result.stdout


async def hold(pool: RayExecutorPool, session: str) -> asyncio.Task[ExecutionResult]:
    """A run of `session` that keeps its sandbox busy until `release`."""
    running = asyncio.create_task(pool.get_python_executor(session).run(HELD))

    def started() -> bool:
        return running.done() or bool(on_node(pool, session, "started"))

    await asyncio.to_thread(wait_for, started, START_SECONDS)
    assert not running.done(), running.result()
    return running


def release(pool: RayExecutorPool, session: str) -> None:
    for started in on_node(pool, session, "started"):
        (started.parent / "release").touch()


async def test_a_third_session_through_the_other_server_ends_the_least_recently_used(
    pools: tuple[RayExecutorPool, RayExecutorPool],
) -> None:
    a, b = pools
    first, second, third = (key(7, name) for name in ("first", "second", "third"))
    await ran(a, first, "x = 1")
    await ran(a, second, "x = 2")
    assert sandboxes(a, 7) == {first, second}
    await ran(b, third, "x = 3")  # the other server: the cap is the cluster's
    await asyncio.to_thread(wait_for, lambda: sandboxes(a, 7) == {second, third}, 10)
    # The ended session's variables come back (from S3), and the next one ends instead.
    assert await ran(b, first, "print(x)") == "1\n"
    await asyncio.to_thread(wait_for, lambda: sandboxes(a, 7) == {third, first}, 10)


async def test_with_a_users_sandboxes_all_busy_the_next_is_refused_on_the_other_server(
    pools: tuple[RayExecutorPool, RayExecutorPool],
) -> None:
    a, b = pools
    busy = [key(8, "busy-1"), key(8, "busy-2")]
    third = key(8, "third")
    held = [await hold(a, session) for session in busy]
    try:
        with pytest.raises(SandboxRefused, match="USER_MAX_SANDBOXES") as refused:
            await b.get_python_executor(third).run("print(1)")
        assert refused.value.retry_after > 0
        assert third not in sandboxes(a)  # no actor was made for it
        assert await ran(b, key(9, "other"), "print(6 * 7)") == "42\n"  # another user's runs
    finally:
        for session in busy:
            release(a, session)
        done = await asyncio.gather(*held)
    assert [result.stdout for result in done] == ["released\n"] * 2
    assert await ran(b, third, "print(1)") == "1\n"  # a busy one became idle: it ended
    assert len(sandboxes(a, 8)) == USER_SANDBOXES


async def test_the_host_cap_holds_across_users_and_servers(
    pools: tuple[RayExecutorPool, RayExecutorPool],
) -> None:
    a, b = pools
    busy = [key(10, "one"), key(10, "two"), key(11, "one")]  # HOST_SANDBOXES of them
    fourth = key(12, "one")
    held = [await hold(a, session) for session in busy]
    try:
        with pytest.raises(SandboxRefused, match="HOST_MAX_SANDBOXES"):
            await b.get_python_executor(fourth).run("print(1)")
        assert sandboxes(a) == set(busy)
    finally:
        for index in (1, 0, 2):  # one at a time: busy[1] is the least recently used
            release(a, busy[index])
            assert (await held[index]).success
    assert await ran(b, fourth, "print(1)") == "1\n"
    assert sandboxes(a) == {busy[0], busy[2], fourth}


def test_the_ledger_drops_actors_that_are_gone_and_busy_marks_past_their_time(
    pools: tuple[RayExecutorPool, RayExecutorPool],
) -> None:
    """A plain ledger over a namespace with no actor: what it counts heals itself."""
    ledger = SandboxLedger(f"empty-{uuid.uuid4().hex[:8]}")  # Ray is connected (`pools`)
    now = [1000.0]
    ledger.clock = lambda: now[0]

    def admit(session: str) -> Any:
        return ledger.admit(session, USER_SANDBOXES, HOST_SANDBOXES, 30.0)

    # Runs whose server went away (never released): busy, their actors perhaps being made.
    assert admit("u5-a").stop == admit("u5-b").stop == []
    refused = admit("u5-c")
    assert refused.refused is not None and "USER_MAX_SANDBOXES" in refused.refused
    now[0] += 30.0 + BUSY_GRACE + 1  # past their time: idle, and their actors are not there
    assert (admit("u5-c").stop, admit("u5-d").stop) == ([], [])
    # Idle ones whose actor is gone (lost with its node, ended unannounced) are not ended.
    ledger.released("u5-c")
    ledger.released("u5-d")
    assert admit("u5-e").stop == []
