"""Fixtures for EXECUTOR_BACKEND=ray: a 2-node Ray cluster on loopback, a workspace bucket
on the shared SeaweedFS, and pools that talk to both."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from backend.storage.mirror import WorkspaceMirror
from backend.storage.workspaces import Workspaces
from backend.tools.sandbox.ray_pool import RayExecutorPool
from tests.support.ray_cluster import LoopbackCluster, ray_cluster, ray_settings, require_ray
from tests.support.seaweedfs import S3Server

MakePool = Callable[..., RayExecutorPool]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LoopbackCluster]:
    """A head (no sandboxes) and 2 sandbox nodes, shared by a test module."""
    require_ray()
    with ray_cluster(nodes=2) as running:
        yield running


@pytest.fixture(scope="module")
def workspace_bucket(s3_server: S3Server) -> str:
    name = f"ray-workspaces-{uuid.uuid4().hex[:8]}"
    s3_server.client().create_bucket(Bucket=name)
    return name


@pytest.fixture
def make_pool(cluster: LoopbackCluster, tmp_path: Path) -> MakePool:
    """`make_pool(s3=None, **settings)`: an API server's pool; with `s3`, workspaces go
    through WORKSPACE_BUCKET there."""

    def make(s3: tuple[S3Server, str] | None = None, **more: object) -> RayExecutorPool:
        api = tmp_path / f"api-{uuid.uuid4().hex[:6]}"
        if s3 is not None:
            server, bucket = s3
            more |= {
                "WORKSPACE_BUCKET": bucket,
                "S3_ENDPOINT_URL": server.endpoint,
                "S3_ACCESS_KEY_ID": server.access_key,
                "S3_SECRET_ACCESS_KEY": server.secret_key,
                "S3_REGION": server.region,
            }
        settings = ray_settings(cluster.address, api / "data", tmp_path / "ray-cache", **more)
        mirror = WorkspaceMirror.from_settings(settings, api / "mirror-manifests")
        return RayExecutorPool(settings, Workspaces(settings.DATA_DIR), mirror)

    return make


@pytest.fixture
def session_id(request: pytest.FixtureRequest) -> str:
    """A fresh session per test: actors are detached and outlive it."""
    name = f"{request.node.name[:40]}-{uuid.uuid4().hex[:8]}".replace("[", "-").replace("]", "")
    return f"u1-{name}"  # a session key: the pool runs keys only
