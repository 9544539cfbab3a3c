"""EXECUTOR_BACKEND=ray on a real 2-node Ray cluster on loopback (issue 13): a session's
sandbox is a named, detached actor that any API server finds, that survives the loss of
its node through S3, that ends itself when idle, and whose run stops when its caller goes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import ray

from backend.config import ConfigError, load_settings
from backend.storage.workspaces import Workspaces
from backend.tools.sandbox.ray_pool import NODE_LOST, RayExecutorPool, actor_name
from tests.scale.conftest import MakePool
from tests.support.live_server import ROOT, free_port
from tests.support.ray_cluster import LoopbackCluster
from tests.support.seaweedfs import S3Server
from tests.support.waiting import wait_for

# A run that says when it has started, then takes long enough to be interrupted.
LONG_RUN = "open('outputs/started', 'w').close()\nimport time\ntime.sleep(60)"
RACING_RUNS = 5


async def node_of(pool: RayExecutorPool, session: str) -> str:
    actor = ray.get_actor(actor_name(session), namespace=pool.namespace)
    return str(await actor.node.remote())


def actor_exists(pool: RayExecutorPool, session: str) -> bool:
    try:
        ray.get_actor(actor_name(session), namespace=pool.namespace)
    except ValueError:
        return False
    return True


def cache(pool: RayExecutorPool, node: str, session: str) -> Path:
    """The session's workspace in that node's cache."""
    return pool.settings.RAY_CACHE_DIR / node / "scratch" / session


async def test_variables_carry_over_through_the_actor(
    make_pool: MakePool, cluster: LoopbackCluster, session_id: str
) -> None:
    executor = make_pool().get_python_executor(session_id)
    assert (await executor.run("x = 41")).success
    result = await executor.run("print(x + 1)")
    assert (result.success, result.stdout, result.error) == (True, "42\n", None)
    sandbox_nodes = {node.node_id for node in cluster.nodes}
    assert await node_of(make_pool(), session_id) in sandbox_nodes  # never on the head


async def test_a_failed_run_keeps_the_variables(make_pool: MakePool, session_id: str) -> None:
    executor = make_pool().get_python_executor(session_id)
    await executor.run("items = [1, 2]")
    failed = await executor.run("items.append(3)\n1 / 0")
    assert not failed.success and "ZeroDivisionError" in (failed.error or "")
    assert (await executor.run("print(items)")).stdout == "[1, 2]\n"


async def test_another_driver_finds_the_session_by_name(
    make_pool: MakePool, cluster: LoopbackCluster, session_id: str, tmp_path: Path
) -> None:
    pool = make_pool()
    await pool.get_python_executor(session_id).run("x = 41")
    node = await node_of(pool, session_id)
    other = await asyncio.to_thread(
        subprocess.run,
        [
            sys.executable, "-m", "tests.scale.other_driver", cluster.address,
            str(tmp_path / "other-api"), str(pool.settings.RAY_CACHE_DIR), session_id,
            "print(x)",
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert other.returncode == 0, other.stderr[-3000:]
    answer = json.loads(other.stdout.strip().splitlines()[-1])
    assert answer["result"]["stdout"] == "41\n", answer
    assert answer["node"] == node  # the same actor, not a new one elsewhere


async def test_a_lost_node_loses_no_persisted_state(
    make_pool: MakePool,
    cluster: LoopbackCluster,
    s3_server: S3Server,
    workspace_bucket: str,
    session_id: str,
) -> None:
    pool = make_pool(s3=(s3_server, workspace_bucket))
    executor = pool.get_python_executor(session_id)
    upload = pool.workspaces.ensure(session_id) / "uploads" / "table.csv"
    upload.write_text("a,b\n1,2\n")  # an upload on the API server reaches the node via S3
    first = await executor.run(
        "import pandas as pd\nx = 41\nrows = len(pd.read_csv('uploads/table.csv'))\n"
        "open('outputs/report.txt', 'w').write('kept')"
    )
    assert first.success, first
    # What the run wrote is back on the API server, for the UI.
    assert (pool.workspaces.path(session_id) / "outputs" / "report.txt").read_text() == "kept"
    lost = await node_of(pool, session_id)
    survivor = next(node.node_id for node in cluster.nodes if node.node_id != lost)

    running = asyncio.create_task(executor.run(LONG_RUN))
    started = cache(pool, lost, session_id) / "outputs" / "started"
    await asyncio.to_thread(wait_for, started.exists)
    cluster.remove_node(cluster.node(lost))
    try:
        interrupted = await asyncio.wait_for(running, 60)
        assert (interrupted.success, interrupted.error) == (False, NODE_LOST)

        # Ray notices the loss and starts the actor again on the other node.
        def restarted() -> bool:
            try:
                actor = ray.get_actor(actor_name(session_id), namespace=pool.namespace)
                return bool(ray.get(actor.node.remote(), timeout=5) == survivor)
            except ray.exceptions.RayError:
                return False

        await asyncio.to_thread(wait_for, restarted, 60)
        after = await executor.run("print(x, rows, open('outputs/report.txt').read())")
        assert (after.success, after.stdout) == (True, "41 1 kept\n"), after
        assert (cache(pool, survivor, session_id) / "uploads" / "table.csv").exists()
    finally:
        cluster.add_node()  # the module's later tests get their 2 nodes back


async def test_an_idle_actor_ends_itself_and_its_successor_restores_the_variables(
    make_pool: MakePool, s3_server: S3Server, workspace_bucket: str, session_id: str
) -> None:
    pool = make_pool(s3=(s3_server, workspace_bucket), SANDBOX_IDLE_SECONDS="1")
    executor = pool.get_python_executor(session_id)
    assert (await executor.run("x = 41")).success
    node = await node_of(pool, session_id)
    await asyncio.to_thread(wait_for, lambda: not actor_exists(pool, session_id), 60)
    # Its worker went with it: nothing holds the node's copy of the workspace any more.
    assert not [pid for pid in _sandbox_processes() if _cwd(pid) == cache(pool, node, session_id)]
    result = await executor.run("print(x)")
    assert (result.success, result.stdout) == (True, "41\n"), result


async def test_runs_racing_the_idle_exit_run_exactly_once(
    make_pool: MakePool, s3_server: S3Server, workspace_bucket: str, session_id: str
) -> None:
    """Each run is sent just after the actor was told to end if idle (idle: 1 ms without a
    run): it reaches the actor before that, or goes to its successor unrun; it is never
    lost, and never run twice."""
    pool = make_pool(s3=(s3_server, workspace_bucket), SANDBOX_IDLE_SECONDS="0.001")
    executor = pool.get_python_executor(session_id)
    assert (await executor.run("x = 0")).success
    actors = set()
    for number in range(1, RACING_RUNS + 1):
        ending: list[ray.ObjectRef[Any]] = []
        with contextlib.suppress(ValueError):  # unless it has just ended on its own
            actor = ray.get_actor(actor_name(session_id), namespace=pool.namespace)
            actors.add(actor._actor_id)
            ending.append(actor.exit_if_idle.remote())
        result = await executor.run("x += 1\nprint(x)")
        assert (result.success, result.stdout) == (True, f"{number}\n"), result
        with contextlib.suppress(ray.exceptions.RayActorError):
            await asyncio.gather(*ending)
    assert len(actors) > 1  # the actor did end meanwhile, and another took over


async def test_a_cancelled_run_stops_on_the_node(make_pool: MakePool, session_id: str) -> None:
    pool = make_pool(PYTHON_CODE_TIMEOUT="120")
    executor = pool.get_python_executor(session_id)
    await executor.run("x = 41")
    node = await node_of(pool, session_id)
    running = asyncio.create_task(executor.run(LONG_RUN))
    started = cache(pool, node, session_id) / "outputs" / "started"
    await asyncio.to_thread(wait_for, started.exists)
    running.cancel()  # what a client disconnect does to the request's task
    with pytest.raises(asyncio.CancelledError):
        await running
    # Were the run still going on the node, this one would wait its 60 s behind it.
    result = await asyncio.wait_for(executor.run("print(x)"), 30)
    assert (result.success, result.stdout) == (True, "41\n"), result


def test_configuration_errors_are_one_line_and_name_the_setting() -> None:
    """In a fresh interpreter, as at a server's start: Ray missing, no RAY_ADDRESS, nothing
    listening there, a Ray Client address."""
    closed = free_port()  # nothing listens on it
    script = (
        "import json, sys\n"
        "from backend.config import ConfigError\n"
        "from backend.tools.sandbox.ray_pool import connect\n"
        "def message(address):\n"
        "    try:\n"
        "        connect(address, 'ns')\n"
        "    except ConfigError as exc:\n"
        "        return str(exc)\n"
        "    return 'no error'\n"
        f"found = [message(''), message('127.0.0.1:{closed}'), message('ray://127.0.0.1:1')]\n"
        "sys.modules['ray'] = None  # what an interpreter without Ray has\n"
        f"print(json.dumps([*found, message('127.0.0.1:{closed}')]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-3000:]
    empty, unreachable, client, missing = json.loads(done.stdout)
    assert missing.startswith("EXECUTOR_BACKEND=ray: Ray is not installed"), missing
    assert empty.startswith("RAY_ADDRESS: EXECUTOR_BACKEND=ray needs"), empty
    assert unreachable.startswith(f"RAY_ADDRESS: the Ray cluster at 127.0.0.1:{closed} "), (
        unreachable
    )
    assert client.startswith("RAY_ADDRESS: ray:// (Ray Client) is not supported"), client
    for message in (missing, empty, unreachable, client):
        assert "\n" not in message and "Traceback" not in message


def test_unsandboxed_code_is_refused_on_ray(tmp_path: Path) -> None:
    """Code outside bubblewrap on a node could reach Ray's ports, and so every node."""
    settings = load_settings(
        EXECUTOR_BACKEND="ray", RAY_ADDRESS="127.0.0.1:1", SANDBOX="none", DATA_DIR=tmp_path
    )
    with pytest.raises(ConfigError, match=r"^SANDBOX: none is refused with EXECUTOR_BACKEND=ray"):
        RayExecutorPool(settings, Workspaces(tmp_path), None)


def _sandbox_processes() -> list[int]:
    """Host pids of bubblewrap sandboxes."""
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and Path(f"/proc/{name}/comm").read_text().strip() == "bwrap":
                found.append(int(name))
        except OSError:
            continue
    return found


def _cwd(pid: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None
