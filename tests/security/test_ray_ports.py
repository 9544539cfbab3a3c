"""Ray is not a security boundary: its ports take any client that reaches them. Code in a
session's sandbox, run through its Ray actor on a real 2-node cluster, reaches none of them
(GCS, raylets, object managers, runtime-env agents, workers, their Unix sockets), nor
anything else listening on the host, nor any other address."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import ray

from backend.storage.workspaces import Workspaces
from backend.tools.sandbox.ray_pool import RayExecutorPool
from tests.support.ray_cluster import LoopbackCluster, ray_cluster, ray_settings, require_ray

ATTEMPTS = """
import json, socket
for family, address in json.loads({targets!r}):
    sock = socket.socket(socket.AF_UNIX if family == 'unix' else socket.AF_INET)
    sock.settimeout(3)
    try:
        sock.connect(address if family == 'unix' else tuple(address))
        print('ESCAPED:', family, address)
    except Exception as exc:
        print('BLOCKED:' + type(exc).__name__, family, address)
    finally:
        sock.close()
"""


@pytest.fixture(autouse=True)
def server_stays_healthy() -> Iterator[None]:
    """This case runs code through a Ray actor, not through the suite's live server."""
    yield


@pytest.fixture(scope="module")
def cluster() -> Iterator[LoopbackCluster]:
    require_ray()
    with ray_cluster(nodes=2) as running:
        yield running


def nodes() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = ray.nodes()  # type: ignore[no-untyped-call]
    return found


def ray_ports(cluster: LoopbackCluster) -> dict[str, int]:
    """Every TCP port Ray's nodes say they listen on, by name."""
    ports = {"GCS": cluster.gcs_port}
    for number, node in enumerate(nodes()):
        for name in ("NodeManagerPort", "ObjectManagerPort", "RuntimeEnvAgentPort"):
            if node[name] > 0:
                ports[f"node {number} {name}"] = node[name]
    return ports


def ray_sockets() -> list[str]:
    return [
        node[name] for node in nodes() for name in ("RayletSocketName", "ObjectStoreSocketName")
    ]


def listening_ports() -> set[int]:
    """Every TCP port something on the host listens on (Ray's workers and drivers too)."""
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A":  # LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def outward_addresses() -> list[str]:
    """This host's address towards the internet, if it has a route there (a UDP socket's
    choice of source address; nothing is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return []
        return [str(probe.getsockname()[0])]


async def test_sandboxed_code_reaches_no_ray_port(cluster: LoopbackCluster, tmp_path: Path) -> None:
    settings = ray_settings(cluster.address, tmp_path / "data", tmp_path / "ray-cache")
    pool = RayExecutorPool(settings, Workspaces(settings.DATA_DIR), None)
    executor = pool.get_python_executor(f"u1-rt-ray-ports-{uuid.uuid4().hex[:8]}")
    assert (await executor.run("print('warm')")).stdout == "warm\n"  # its actor is up

    named = ray_ports(cluster)
    assert len(named) >= 1 + 3 * 3  # GCS, and each of the 3 nodes' raylet, objects, agent
    # They are real targets: from the host, every one of them answers.
    for port in named.values():
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
    for path in ray_sockets():
        with socket.socket(socket.AF_UNIX) as unix:
            unix.connect(path)

    ports = sorted(set(named.values()) | listening_ports())
    targets: list[tuple[str, object]] = [("tcp", ["127.0.0.1", port]) for port in ports]
    targets += [
        ("tcp", [host, port])
        for host in outward_addresses()
        for port in sorted(set(named.values()))
    ]
    targets += [("tcp", ["1.1.1.1", 53]), ("tcp", ["169.254.169.254", 80])]
    targets += [("unix", path) for path in ray_sockets()]
    result = await executor.run(ATTEMPTS.format(targets=json.dumps(targets)), timeout=60)
    lines = result.stdout.splitlines()
    assert not [line for line in lines if line.startswith("ESCAPED")], result.stdout
    assert len([line for line in lines if line.startswith("BLOCKED:")]) == len(targets), result
