"""Issue 40: plain chat replies take places on the shared model, per user and in all.

Before, a plain chat turn took no run slot, so one user could hold any number of streams
on the model everyone shares. Now each takes a `chat_stream` place from the governor: one
more than a user's share waits for one of theirs, one more than the server's for anyone's,
then, after WORK_WAIT_SECONDS, a 429 and a 503, both with Retry-After; a stream that ends
gives its place back.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, closing
from pathlib import Path

import httpx
import pytest

from tests.conftest import scripted_server
from tests.support.live_server import LiveServer

SLOW = " ".join(["word"] * 4000)  # 4000 tokens, 50 ms apart: minutes, unless the client goes


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder: Path = tmp_path_factory.mktemp("chat-bounds")
    replies = [
        {"when": "Q-SLOW", "content": SLOW, "token_delay": 0.05, "repeat": True},
        {"when": "Q-QUICK", "content": "Quick answer.", "repeat": True},
    ]
    limits = '{"chat_stream": {"total": 3, "per_user": 2}}'
    with scripted_server(folder, replies, WORK_LIMITS=limits, WORK_WAIT_SECONDS="1") as live:
        yield live


def _person(server: LiveServer, name: str) -> httpx.Client:
    password = f"{name}-password-1"
    with server.client() as admin:
        made = admin.post("/api/users", json={"username": name, "password": password})
    assert made.status_code == 201, made.text
    return server.client(server.token(name, password), timeout=60)


def _ask(text: str) -> dict[str, object]:
    return {"message": text, "agent_type": "chat", "stream": True}


def _opened(streams: ExitStack, http: httpx.Client, text: str) -> Iterator[str]:
    """A streamed reply, begun (its first token read) and then left unread; keep what this
    returns: httpx closes the response when its line iterator is collected."""
    reply = streams.enter_context(http.stream("POST", "/api/chat", json=_ask(text)))
    assert reply.status_code == 200, reply.read()
    lines = reply.iter_lines()
    assert any("word" in line for line in lines)
    return lines


def test_plain_chat_streams_take_places_per_user_and_in_all(server: LiveServer) -> None:
    a, b = _person(server, "streamer"), _person(server, "colleague")
    with closing(a), closing(b), ExitStack() as a_streams:
        kept = [_opened(a_streams, a, f"Q-SLOW {n}") for n in range(2)]
        third = a.post("/api/chat", json=_ask("Q-SLOW three"))
        assert third.status_code == 429, third.text
        assert third.json()["code"] == "too_many_requests"
        assert int(third.headers["Retry-After"]) >= 1
        via_openai = a.post(
            "/v1/chat/completions",
            json={"model": "scripted", "messages": [{"role": "user", "content": "Q-QUICK"}]},
        )
        assert via_openai.status_code == 429, via_openai.text  # every route, one share
        assert via_openai.json()["error"]["code"] == "too_many_requests"

        with ExitStack() as b_streams:
            kept.append(_opened(b_streams, b, "Q-SLOW mine"))  # the server's third place
            busy = b.post("/api/chat", json=_ask("Q-QUICK"))
            assert busy.status_code == 503, busy.text
            assert busy.json()["code"] == "server_busy"
            assert int(busy.headers["Retry-After"]) >= 1
            assert b.get("/api/conversations").status_code == 200  # other work goes on

        a_streams.close()  # A's clients go: the server ends their turns and frees the places
        answered = b.post("/api/chat", json={**_ask("Q-QUICK"), "stream": False})
        assert answered.status_code == 200, answered.text
        assert "Quick answer." in answered.text
