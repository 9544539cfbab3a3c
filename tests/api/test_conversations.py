"""/api/chat keeps the conversation; users only ever see their own.

The tests share one live server on the scripted model: each test is a user of its own, and
its replies are tagged with words only its messages carry."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import write_replies
from tests.support.shared_server import SharedServer, SignedIn, module_server, own_user, sign_up

# Each call takes the first unused reply whose `when` its message holds: "long" (a
# disconnected turn's) comes before "go", which it holds too.
REPLIES = [
    {"when": "first message", "content": "Noted."},
    {"when": "second message", "content": "Still here."},
    {"when": "one", "content": "ok"},
    {"when": "two", "content": "ok"},
    {"when": "hi", "content": "Typed events work."},
    {"when": "long", "content": "word " * 200, "token_delay": 0.05},
    {"when": "go", "content": "a slow answer in many words " * 3, "token_delay": 0.05},
    {"when": "again", "content": "Later reply."},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    root = tmp_path_factory.mktemp("conversations")
    with module_server(root, SCRIPTED_REPLIES=write_replies(root / "r.json", REPLIES)) as live:
        yield live


@pytest.fixture
def user(server: SharedServer, request: pytest.FixtureRequest) -> SignedIn:
    return own_user(server, request)


def test_session_continues_and_users_are_isolated(server: SharedServer, user: SignedIn) -> None:
    with user.client() as alice:
        first = alice.post("/api/chat", json={"message": "first message", "session_id": "s-1"})
        assert first.status_code == 200, first.text
        assert first.json()["answer"] == "Noted."
        second = alice.post("/api/chat", json={"message": "second message", "session_id": "s-1"})
        assert second.json()["answer"] == "Still here."
        conversation_id = second.json()["conversation_id"]
        assert conversation_id == first.json()["conversation_id"]

        listed = alice.get("/api/conversations").json()
        assert [(c["id"], c["session_id"], c["title"]) for c in listed] == [
            (conversation_id, "s-1", "first message")
        ]
        detail = alice.get(f"/api/conversations/{conversation_id}").json()
        assert [(m["role"], m["content"]) for m in detail["messages"]] == [
            ("user", "first message"),
            ("assistant", "Noted."),
            ("user", "second message"),
            ("assistant", "Still here."),
        ]
    other = sign_up(server, "bob")

    with other.client() as bob:
        assert bob.get("/api/conversations").json() == []
        assert bob.get(f"/api/conversations/{conversation_id}").status_code == 404
        assert bob.delete(f"/api/conversations/{conversation_id}").status_code == 404
        # Sessions are namespaced by their owner: bob's "s-1" is his own, and empty.
        assert bob.get("/api/sessions/s-1/files").status_code == 404
        mine = bob.post(
            "/api/upload", data={"session_id": "s-1"}, files={"file": ("b.csv", b"x\n1\n")}
        )
        assert mine.status_code == 201, mine.text
        assert mine.json()["session_id"] == "s-1"
        (own,) = bob.get("/api/conversations").json()
        assert own["session_id"] == "s-1" and own["id"] != conversation_id
        assert [f["path"] for f in bob.get("/api/sessions/s-1/files").json()] == ["uploads/b.csv"]
        assert (
            bob.post("/api/users", json={"username": "eve", "password": "x" * 8}).status_code == 403
        )

    with user.client() as alice:
        assert alice.delete(f"/api/conversations/{conversation_id}").status_code == 204
        assert alice.get("/api/conversations").json() == []

    logged = (server.data_dir / "logs" / "prompts.jsonl").read_text().splitlines()
    records = [r for r in map(json.loads, logged) if r["user"] == user.username]
    assert [(r["user"], r["answer"]) for r in records] == [
        (user.username, "Noted."),
        (user.username, "Still here."),
    ]
    assert records[1]["prompt"][-1] == {"role": "human", "content": "second message"}


def test_stored_history_reaches_the_model_when_the_client_sends_one_message(
    user: SignedIn,
) -> None:
    """A client that sends only the new message with a session_id gets the stored history."""
    body = {
        "model": "scripted",
        "session_id": "hist",
        "messages": [{"role": "user", "content": "one"}],
    }
    with user.client() as http:
        http.post("/v1/chat/completions", json=body).raise_for_status()
        body["messages"] = [{"role": "user", "content": "two"}]
        usage = http.post("/v1/chat/completions", json=body).json()["usage"]
    # "one", "ok" and "two" are three prompt tokens: the history was prepended.
    assert usage["prompt_tokens"] == 3


def test_chat_stream_sends_typed_events(user: SignedIn) -> None:
    with (
        user.client() as http,
        http.stream(
            "POST", "/api/chat", json={"message": "hi", "stream": True, "session_id": "ev"}
        ) as response,
    ):
        frames = response.read().decode().strip().split("\n\n")
    events = []
    for frame in frames:
        kind, data = frame.split("\n")
        payload = json.loads(data.removeprefix("data: "))
        assert kind == f"event: {payload['type']}"
        events.append(payload)
    assert [e["type"] for e in events] == ["router", "token", "token", "token", "final", "done"]
    assert events[-2]["text"] == "Typed events work." and events[-2]["session_id"] == "ev"


def test_deleting_a_conversation_mid_turn_leaves_the_server_healthy(
    server: SharedServer, user: SignedIn
) -> None:
    body = {"message": "go", "session_id": "doomed", "stream": True}
    with user.client() as http:
        with http.stream("POST", "/api/chat", json=body) as response:
            lines = response.iter_lines()
            router = json.loads(next(line for line in lines if line.startswith("data: "))[6:])
            conversation_id = router["type"] and http.get("/api/conversations").json()[0]["id"]
            assert http.delete(f"/api/conversations/{conversation_id}").status_code == 204
            rest = list(lines)
        assert 'data: {"type":"done"}' in rest
        assert not any('"type":"error"' in line for line in rest)
        after = http.post("/api/chat", json={"message": "again", "session_id": "fresh"})
        assert after.status_code == 200 and after.json()["answer"] == "Later reply."
    with server.client(server.admin_token) as admin:
        created = admin.post("/api/users", json={"username": "carol", "password": "carol-pass"})
        assert created.status_code == 201
    assert server.token("carol", "carol-pass")


def test_non_streaming_disconnect_cancels_the_turn(user: SignedIn) -> None:
    with user.client() as http:
        with pytest.raises(httpx.ReadTimeout):
            http.post("/api/chat", json={"message": "long", "session_id": "gone"}, timeout=1.0)
        deadline = time.monotonic() + 5  # the full answer would take 10 s
        while time.monotonic() < deadline:
            conversation = http.get("/api/conversations").json()[0]
            messages = http.get(f"/api/conversations/{conversation['id']}").json()["messages"]
            if len(messages) == 2:
                break
            time.sleep(0.1)
    assert messages[1]["metadata"]["finish_reason"] == "cancelled"
    assert 0 < len(messages[1]["content"].split()) < 200


def test_api_validation_errors_are_readable(user: SignedIn) -> None:
    with user.client() as http:
        empty = http.post("/api/chat", json={"message": ""})
        bad_session = http.post("/api/chat", json={"message": "x", "session_id": "../etc"})
        broken = http.post("/api/chat", content=b"{", headers={"content-type": "application/json"})
    assert empty.status_code == 422 and "message" in empty.json()["detail"]
    assert bad_session.status_code == 422 and "session_id" in bad_session.json()["detail"]
    assert (
        broken.status_code == 400
        and broken.json()["detail"] == "The request body is not valid JSON."
    )
