"""`/api/runs`: background turns with numbered events, replay, cancel and ownership."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import scripted_server
from tests.support.agent_script import CODE, react_turn, slow_turn, sse_events, upload
from tests.support.live_server import LiveServer

Events = list[tuple[str, dict[str, Any]]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("runs")
    replies = [
        *react_turn("Q-RUN"),
        *slow_turn("Q-STOP"),
        *react_turn("Q-NEXT"),
        *slow_turn("Q-GONE"),
        {"when": "Q-CHAT", "content": "Hello from the run.", "token_delay": 0.01},
    ]
    with scripted_server(folder, replies) as live:
        with live.client() as admin:
            created = admin.post("/api/users", json={"username": "eve", "password": "eve-password"})
            assert created.status_code == 201
        yield live


def start(http: httpx.Client, message: str, session: str) -> dict[str, Any]:
    response = http.post("/api/runs", json={"message": message, "session_id": session})
    assert response.status_code == 202, response.text
    return dict(response.json())


def follow(http: httpx.Client, run_id: str, after: int = 0, until: str = "done") -> Events:
    events: Events = []
    with http.stream("GET", f"/api/runs/{run_id}/events", params={"after": after}) as reply:
        assert reply.status_code == 200
        assert reply.headers["content-type"].startswith("text/event-stream")
        for event in sse_events(reply.iter_lines()):
            events.append(event)
            if event[0] == until:
                break
    return events


def test_a_run_streams_numbered_events_and_replays_from_any_point(server: LiveServer) -> None:
    upload(server, "run")
    with server.client(timeout=120) as http:
        run = start(http, "Q-RUN what is the mean price in sales.csv?", "run")
        events = follow(http, run["run_id"])
        replayed = follow(http, run["run_id"], after=3)
        status = http.get(f"/api/runs/{run['run_id']}").json()

    kinds = [name for name, _ in events]
    assert kinds[:5] == ["router", "tool_call", "code", "execution", "plot"]
    assert kinds[-2:] == ["final", "done"] and set(kinds[5:-2]) == {"token"}
    assert [data["seq"] for _, data in events] == list(range(1, len(events) + 1))
    assert replayed == events[3:]  # the same events, the same numbers
    data = dict(events)
    assert data["code"]["attempt"] == 1 and data["code"]["code"].endswith(CODE)
    assert data["execution"]["ok"] and data["execution"]["attempt"] == 1
    assert data["final"]["text"] == "The mean price is 20.0."
    assert data["done"]["status"] == "completed"
    assert status == {
        "run_id": run["run_id"],
        "status": "completed",
        "session_id": "run",
        "conversation_id": run["conversation_id"],
        "last_seq": len(events),
    }


def test_stop_kills_the_code_keeps_the_steps_and_the_session_works_at_once(
    server: LiveServer,
) -> None:
    upload(server, "stop")
    with server.client(timeout=120) as http:
        run = start(http, "Q-STOP compute the csv mean slowly", "stop")
        seen = follow(http, run["run_id"], until="code")  # the 20 s code is running now
        listed = http.get(f"/api/conversations/{run['conversation_id']}").json()
        busy = http.post("/api/runs", json={"message": "Q-NEXT again", "session_id": "stop"})
        cancelled = http.post(f"/api/runs/{run['run_id']}/cancel")
        rest = follow(http, run["run_id"], after=seen[-1][1]["seq"])
        nxt = start(http, "Q-NEXT what is the csv mean?", "stop")
        after = follow(http, nxt["run_id"])
        conversation = http.get(f"/api/conversations/{run['conversation_id']}").json()

    assert listed["active_run_id"] == run["run_id"]
    assert busy.status_code == 409 and "already in progress" in busy.json()["detail"]
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert rest == [("done", {"type": "done", "status": "cancelled", "seq": len(seen) + 1})]
    assert dict(after)["final"]["text"] == "The mean price is 20.0."
    assert conversation["active_run_id"] is None
    stopped, answered = [m for m in conversation["messages"] if m["role"] == "assistant"]
    assert stopped["metadata"]["finish_reason"] == "cancelled"
    # The stored steps redraw the stopped turn's timeline.
    assert [s["type"] for s in stopped["metadata"]["steps"]] == ["tool_call", "code"]
    assert [s["type"] for s in answered["metadata"]["steps"]] == [
        "tool_call",
        "code",
        "execution",
        "plot",
    ]


def test_a_dropped_stream_does_not_stop_the_run(server: LiveServer) -> None:
    with server.client(timeout=60) as http:
        run = start(http, "Q-CHAT say hello", "drop")
        first = follow(http, run["run_id"], until="router")  # then hang up
        rest = follow(http, run["run_id"], after=first[-1][1]["seq"])
    assert dict(rest)["final"]["text"] == "Hello from the run."
    assert rest[-1][1]["status"] == "completed"


def test_only_the_owner_sees_or_stops_a_run(server: LiveServer) -> None:
    upload(server, "mine")
    eve = server.token("eve", "eve-password")
    with server.client(timeout=120) as http, server.client(eve) as other:
        run = start(http, "Q-GONE compute the csv mean slowly", "mine")
        follow(http, run["run_id"], until="code")
        run_id = run["run_id"]
        answers = [
            other.get(f"/api/runs/{run_id}"),
            other.get(f"/api/runs/{run_id}/events"),
            other.post(f"/api/runs/{run_id}/cancel"),
            http.get("/api/runs/no-such-run"),
        ]
        # Sessions are namespaced by their owner: eve's "mine" is not this one (and unused).
        intruder = other.get("/api/sessions/mine/files")
        still = http.get(f"/api/runs/{run_id}").json()["status"]
        # Deleting the conversation stops its run too.
        deleted = http.delete(f"/api/conversations/{run['conversation_id']}")
        gone = http.get(f"/api/runs/{run_id}")
    assert [a.status_code for a in answers] == [404, 404, 404, 404]
    assert all(a.json()["detail"] == "Run not found." for a in answers)
    assert intruder.status_code == 404, intruder.text
    assert still == "running"
    # ...and forgets it with the rest of the session.
    assert deleted.status_code == 204 and gone.status_code == 404


def test_bad_run_requests_are_clear_errors(server: LiveServer) -> None:
    with server.client() as http:
        empty = http.post("/api/runs", json={"message": ""})
        bad_session = http.post("/api/runs", json={"message": "hi", "session_id": "../x"})
        bad_after = http.get("/api/runs/x/events", params={"after": -1})
    assert [empty.status_code, bad_session.status_code, bad_after.status_code] == [422, 422, 422]
    unauthenticated = httpx.post(f"{server.url}/api/runs", json={"message": "hi"})
    assert unauthenticated.status_code == 401
