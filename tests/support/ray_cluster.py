"""A real Ray cluster on loopback for tests and benchmarks (`ray.cluster_utils.Cluster`).

A head node with no CPUs (the GCS, and the test process's driver: no sandbox lands
there, as Ray advises for a production head) and `nodes` sandbox nodes, each a raylet
with its own object manager and workers. Every port is bound to 127.0.0.1; no dashboard,
no usage statistics, a 80 MB object store per node, Ray's files in a temporary folder
that is removed afterwards.

Ray resolves 127.0.0.1 in a driver's address to the host's outward address (the one
towards 8.8.8.8) unless clusters are "disabled", as on macOS; that switch is what keeps
the driver on loopback. It is an environment variable that Ray reads once, when it is
imported, so this module sets it and must be imported before Ray.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from backend.config import Settings, load_settings
from tests.support.live_server import ROOT
from tests.support.processes import descendants
from tests.support.waiting import wait_for

LOOPBACK = "127.0.0.1"
CLUSTER_SWITCH = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
ENVIRONMENT = {
    "RAY_USAGE_STATS_ENABLED": "0",
    CLUSTER_SWITCH: "0",  # node addresses stay 127.0.0.1
}
# Ray reads the switch once, when it is imported: if that was before this module, with the
# switch on (unset is on), this process's driver would leave loopback.
_switch = os.environ.get(CLUSTER_SWITCH, "1").lower()
RAY_IMPORTED_FIRST = "ray" in sys.modules and _switch in {"1", "true"}
for _name, _value in ENVIRONMENT.items():
    os.environ[_name] = _value

try:
    import ray
    from ray.cluster_utils import Cluster
except ImportError:  # pragma: no cover - depends on the environment
    ray = None  # type: ignore[assignment]

OBJECT_STORE_BYTES = 80 * 1024**2
STOP_TIMEOUT = 30.0  # seconds for every Ray process to be gone after a shutdown
RAY_NAMES = ("ray::", "raylet", "gcs_server")
# A lost raylet is noticed within ~1 s instead of Ray's default 15 s.
FAST_FAILURE_DETECTION = {
    "health_check_initial_delay_ms": 0,
    "health_check_period_ms": 250,
    "health_check_timeout_ms": 250,
    "health_check_failure_threshold": 4,
}


def ray_settings(address: str, data_dir: Path, cache_dir: Path, **more: object) -> Settings:
    """An API server's settings for EXECUTOR_BACKEND=ray on the cluster at `address`."""
    values: dict[str, object] = {
        "EXECUTOR_BACKEND": "ray",
        "RAY_ADDRESS": address,
        "DATA_DIR": data_dir,
        "RAY_CACHE_DIR": cache_dir,  # one folder for every pool, as it is one setting
        "SANDBOX": "bwrap",
    }
    return load_settings(**(values | more))


def require_ray() -> None:
    """Skip, loudly, when Ray is not importable here."""
    if ray is None:
        pytest.skip(
            "RAY TESTS NOT RUN: Ray is not installed; install it with "
            "`pip install -r requirements-ray.txt` (requirements-dev.txt includes it)"
        )


@dataclass
class LoopbackCluster:
    cluster: Any  # ray.cluster_utils.Cluster
    temp_dir: Path
    nodes: list[Any] = field(default_factory=list)  # the sandbox nodes (ray._private.node.Node)

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    @property
    def gcs_port(self) -> int:
        return int(self.address.rsplit(":", 1)[1])

    def node(self, node_id: str) -> Any:
        """The sandbox node with this Ray node id."""
        return next(node for node in self.nodes if node.node_id == node_id)

    def add_node(self) -> Any:
        with _node_environment(self.temp_dir):
            node = self.cluster.add_node(
                num_cpus=1,
                object_store_memory=OBJECT_STORE_BYTES,
                node_ip_address=LOOPBACK,
            )
        self.nodes.append(node)
        self.cluster.wait_for_nodes()
        return node

    def remove_node(self, node: Any) -> None:
        """SIGKILL the node's raylet, object store and workers: a machine lost."""
        self.cluster.remove_node(node, allow_graceful=False)
        self.nodes.remove(node)


@contextlib.contextmanager
def _node_environment(temp_dir: Path) -> Iterator[None]:
    """While nodes start: their workers can import `backend` (PYTHONPATH), and what Ray
    writes to its default folder (the head's address, in /tmp/ray) goes into `temp_dir`."""
    values = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "RAY_TMPDIR": str(temp_dir),
    }
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    (temp_dir / "ray").mkdir(exist_ok=True)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value


@contextlib.contextmanager
def ray_cluster(nodes: int = 2) -> Iterator[LoopbackCluster]:
    """A head and `nodes` sandbox nodes on 127.0.0.1; the driver is disconnected and every
    Ray process stopped on the way out."""
    if ray is None:
        raise RuntimeError("Ray is not installed")
    if RAY_IMPORTED_FIRST:
        raise RuntimeError(
            "Ray was imported before tests.support.ray_cluster, so this process's driver "
            f"would leave 127.0.0.1: import that module first, or set {CLUSTER_SWITCH}=0"
        )
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-", dir="/tmp"))  # short: socket paths
    cluster = Cluster()  # its first node is the head
    running = LoopbackCluster(cluster, temp_dir)
    try:
        with _node_environment(temp_dir):
            cluster.add_node(
                num_cpus=0,
                include_dashboard=False,
                object_store_memory=OBJECT_STORE_BYTES,
                node_ip_address=LOOPBACK,
                temp_dir=str(temp_dir),
                # A copy: Ray adds its spilling folder (this cluster's) to the dict it gets.
                _system_config=dict(FAST_FAILURE_DETECTION),
            )
        for _ in range(nodes):
            running.add_node()
        yield running
    finally:
        started = ray_processes()
        ray.shutdown()
        cluster.shutdown()  # type: ignore[no-untyped-call]
        # Workers outlive their raylet for a moment, and write into its session folder.
        wait_for(lambda: not any(alive(pid) for pid in started), STOP_TIMEOUT)
        shutil.rmtree(temp_dir, ignore_errors=True)


def ray_processes() -> set[int]:
    """This process's descendants that Ray started (weed and others are left out), with the
    sandboxes below them."""
    found: set[int] = set()
    for pid in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            if name.startswith(RAY_NAMES) or b"/site-packages/ray/" in command:
                found |= {pid, *descendants(pid)}
    return found


def alive(pid: int) -> bool:
    """Running, or stopped: not gone, and not a zombie waiting for a parent to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
