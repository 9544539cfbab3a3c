"""A user's share of the server's expensive work holds across API servers (issue 40).

Two API server processes on one PostgreSQL, as behind a load balancer: each bounds its
own work, and a user's places (here plain chat streams, one per user) are counted on
both, so spreading requests over the servers does not multiply the share.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import ExitStack, closing
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD, write_replies
from tests.support.live_server import LiveServer
from tests.support.postgres import PostgresServer
from tests.support.waiting import wait_for

SLOW = " ".join(["word"] * 4000)  # 4000 tokens, 50 ms apart: minutes, unless the client goes


@pytest.fixture
def servers(tmp_path: Path, postgres_server: PostgresServer) -> Iterator[list[LiveServer]]:
    replies = write_replies(
        tmp_path / "replies.json",
        [
            {"when": "Q-SLOW", "content": SLOW, "token_delay": 0.05, "repeat": True},
            {"when": "Q-QUICK", "content": "Quick answer.", "repeat": True},
        ],
    )
    shared = {
        "DATABASE_URL": postgres_server.new_database(),
        "SECRET_KEY": secrets.token_urlsafe(40),
        "ADMIN_PASSWORD": ADMIN_PASSWORD,
        "LLM_BACKEND": "scripted",
        "SCRIPTED_REPLIES": replies,
        "WORK_LIMITS": '{"chat_stream": {"total": 8, "per_user": 1}}',
        "WORK_WAIT_SECONDS": "1",
    }
    started: list[LiveServer] = []
    try:
        for name in ("a", "b"):
            started.append(LiveServer(tmp_path / name, **shared).start())
        yield started
    finally:
        for server in started:
            server.stop()


def _ask(text: str, *, stream: bool = True) -> dict[str, object]:
    return {"message": text, "agent_type": "chat", "stream": stream}


def test_a_users_share_is_counted_on_every_server(servers: list[LiveServer]) -> None:
    a, b = servers
    with a.client() as admin:
        for name in ("spreader", "colleague"):
            made = admin.post("/api/users", json={"username": name, "password": f"{name}-pw-1"})
            assert made.status_code == 201, made.text
    spreader = a.token("spreader", "spreader-pw-1")  # one signing key: valid on both
    with (
        closing(a.client(spreader)) as on_a,
        closing(b.client(spreader)) as on_b,
        closing(b.client(b.token("colleague", "colleague-pw-1"))) as colleague,
        ExitStack() as streams,
    ):
        reply = streams.enter_context(on_a.stream("POST", "/api/chat", json=_ask("Q-SLOW")))
        assert reply.status_code == 200, reply.read()
        lines = reply.iter_lines()  # kept: httpx closes the response when it is collected
        assert any("word" in line for line in lines)

        refused = on_b.post("/api/chat", json=_ask("Q-QUICK", stream=False))
        assert refused.status_code == 429, refused.text
        assert refused.json()["code"] == "too_many_requests"
        assert "on this server and the others" in refused.json()["detail"]
        assert int(refused.headers["Retry-After"]) >= 1
        # Another user on the same server is not held back by it.
        other = colleague.post("/api/chat", json=_ask("Q-QUICK", stream=False))
        assert other.status_code == 200, other.text

        streams.close()  # the client goes: server A ends the turn and gives the place back
        answered: list[httpx.Response] = []

        def served() -> bool:
            answered.append(on_b.post("/api/chat", json=_ask("Q-QUICK", stream=False)))
            return answered[-1].status_code == 200

        wait_for(served, timeout=30)
        assert "Quick answer." in answered[-1].text
