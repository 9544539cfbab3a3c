"""One live server for the whole red-team suite, with the AST pre-filter off.

With AST_PREFILTER=false every hostile snippet reaches the OS sandbox, which is what is
under test here. After every case the server must still be healthy and able to start a
fresh session.
"""

from __future__ import annotations

import secrets as random_secrets
from collections.abc import Iterator

import pytest

from tests.security.helpers import (
    Secrets,
    assert_healthy,
    client,
    close_clients,
    new_session,
)
from tests.support.live_server import LiveServer

ADMIN_PASSWORD = f"rt-admin-{random_secrets.token_hex(12)}"
OPENAI_KEY = f"sk-redteam-{random_secrets.token_hex(16)}"
CANARY = f"rt-canary-{random_secrets.token_hex(16)}"


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("redteam")
    replies = base / "replies.json"
    replies.write_text("[]")
    live = LiveServer(
        base / "data",
        LLM_BACKEND="scripted",
        SCRIPTED_REPLIES=str(replies),
        ADMIN_PASSWORD=ADMIN_PASSWORD,
        AST_PREFILTER="false",
        PYTHON_CODE_TIMEOUT="5",
        PYTHON_CODE_MAX_MEMORY="512",
        # Reap idle sandboxes quickly: the suite starts one or two per case.
        SANDBOX_IDLE_SECONDS="30",
        # Host-only values that must never be visible inside the sandbox.
        OPENAI_API_KEY=OPENAI_KEY,
        REDTEAM_CANARY=CANARY,
    )
    live.start()
    try:
        yield live
    finally:
        close_clients()
        live.stop()


@pytest.fixture(scope="session")
def secrets(server: LiveServer) -> Secrets:
    token = client(server).headers["Authorization"].removeprefix("Bearer ")
    return Secrets(
        secret_key=(server.data_dir / "secret_key").read_text().strip(),
        admin_password=ADMIN_PASSWORD,
        openai_key=OPENAI_KEY,
        canary=CANARY,
        token=token,
    )


@pytest.fixture
def sid(request: pytest.FixtureRequest) -> str:
    """A fresh session id named after the test."""
    return new_session(request.node.name)


@pytest.fixture(autouse=True)
def server_stays_healthy(server: LiveServer) -> Iterator[None]:
    yield
    assert_healthy(server)
