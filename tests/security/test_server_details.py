"""What the server tells about itself: anonymous /health only that it is up; an admin the
details (database, executor, LLM, sandbox); a signed-in user what the UI shows, with no
path, host or bucket. Requests and whole answers only, so the app runs in this process
(tests/support/app_client.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import StartApp, write_replies
from tests.support.app_client import InProcessServer


@pytest.fixture(autouse=True)
def server_stays_healthy() -> None:
    """This test starts a server of its own, not the red-team suite's shared one."""


@pytest.fixture
def server(start_app: StartApp, tmp_path: Path) -> InProcessServer:
    return start_app(SCRIPTED_REPLIES=write_replies(tmp_path / "replies.json", []))


def member_token(server: InProcessServer) -> str:
    with server.client() as admin:
        created = admin.post("/api/users", json={"username": "member", "password": "member-pass"})
        assert created.status_code == 201, created.text
    return server.token("member", "member-pass")


def test_health_tells_anyone_only_that_the_server_is_up(server: InProcessServer) -> None:
    member = member_token(server)
    for headers in (
        {},
        {"Authorization": "Bearer not-a-token"},
        {"Authorization": f"Bearer {member}"},
    ):
        answer = server.request("GET", "/health", headers=headers)
        assert answer.status_code == 200
        assert answer.json() == {"status": "ok"}, headers
        assert str(server.data_dir) not in answer.text


def test_an_admin_sees_the_details(server: InProcessServer) -> None:
    with server.client() as admin:
        health = admin.get("/health").json()
    assert health["status"] == "ok"
    assert str(server.data_dir.resolve()) in health["database"]["location"]
    assert health["executor"] == {"backend": "local"}
    assert health["llm"]["backend"] == "scripted" and "reason" in health["llm"]
    assert "mode" in health["sandbox"] and "max_file_mb" in health["upload"]


def test_a_signed_in_user_gets_what_the_ui_shows_and_nothing_of_the_host(
    server: InProcessServer,
) -> None:
    assert server.request("GET", "/api/status").status_code == 401
    with server.client(member_token(server)) as member:
        answer = member.get("/api/status")
    assert answer.status_code == 200, answer.text
    status = answer.json()
    assert status["llm"] == {
        "backend": "scripted",
        "model": "scripted",
        "profile": {  # the scripted model's own, never probed
            "size": "capable",
            "native_tools": False,
            "long_context": True,
            "context_window": 131_072,
            "source": "backend",
        },
    }
    assert {"mode", "isolated"} <= status["sandbox"].keys()
    assert {"max_file_mb", "max_upload_mb", "extensions"} <= status["upload"].keys()
    assert status.keys() == {"llm", "sandbox", "upload"}  # no database, executor or reason
    assert str(server.data_dir) not in answer.text and "127.0.0.1" not in answer.text
