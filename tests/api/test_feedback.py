"""Issue 41: a thumb up or down, with a note, on an answer; counted per model in usage
and metrics; another user's answers, questions, deleted and made-up ids are not found."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import scripted_server
from tests.support.live_server import LiveServer

REPLIES = [
    {"when": "weather", "content": "Sunny."},
    {"when": "rain", "content": "Wet."},
    {"when": "snow", "content": "Cold."},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(
        tmp_path_factory.mktemp("feedback"), REPLIES, METRICS_ENABLED="true"
    ) as live:
        yield live


def _person(server: LiveServer, name: str) -> httpx.Client:
    with server.client() as admin:
        made = admin.post("/api/users", json={"username": name, "password": f"{name}-password"})
    assert made.status_code == 201, made.text
    return server.client(server.token(name, f"{name}-password"))


def _answer(http: httpx.Client, question: str, session: str) -> tuple[str, int, int]:
    """The conversation, the question's id and the answer's."""
    said = http.post("/api/chat", json={"message": question, "session_id": session})
    assert said.status_code == 200, said.text
    conversation = said.json()["conversation_id"]
    question_m, answer_m = http.get(f"/api/conversations/{conversation}").json()["messages"][-2:]
    return conversation, question_m["id"], answer_m["id"]


def test_an_answer_gets_a_thumb_and_a_note_counted_per_model(server: LiveServer) -> None:
    with _person(server, "rater") as http:
        conversation, _, answer = _answer(http, "weather today?", "rated")
        url = f"/api/conversations/{conversation}/messages/{answer}/feedback"
        given = http.put(url, json={"rating": "down", "note": " wrong city "})
        assert given.status_code == 200, given.text
        assert {k: given.json()[k] for k in ("message_id", "rating", "note", "model")} == {
            "message_id": answer,
            "rating": "down",
            "note": "wrong city",
            "model": "scripted",
        }
        again = http.put(url, json={"rating": "up"})  # changed: one per answer
        assert (again.json()["rating"], again.json()["note"]) == ("up", "")
        shown = http.get(f"/api/conversations/{conversation}").json()["messages"]
        assert [m["feedback"] and m["feedback"]["rating"] for m in shown] == [None, "up"]
        assert http.get("/api/users/me/usage").json()["feedback"] == {
            "scripted": {"up": 1, "down": 0}
        }

        assert http.delete(url).status_code == 204
        assert http.delete(url).status_code == 404
        assert http.get("/api/users/me/usage").json()["feedback"] == {}
        assert http.put(url, json={"rating": "up"}).status_code == 200

    with server.client() as admin:
        overview = admin.get("/api/usage").json()
        assert overview["feedback"]["scripted"]["up"] >= 1
    metrics = httpx.get(f"{server.url}/metrics").text
    assert 'pda_answer_feedback_total{model="scripted",rating="down"}' in metrics


def test_only_the_asker_rates_their_own_answers(server: LiveServer) -> None:
    with _person(server, "owner") as owner, _person(server, "other") as other:
        conversation, question, answer = _answer(owner, "rain tomorrow?", "mine")
        url = f"/api/conversations/{conversation}/messages/{answer}/feedback"
        assert owner.put(url, json={"rating": "up", "note": "good"}).status_code == 200

        # Another user: the answer, the conversation and the feedback are not found.
        assert other.put(url, json={"rating": "down"}).status_code == 404
        assert other.delete(url).status_code == 404
        assert other.get("/api/users/me/usage").json()["feedback"] == {}
        other_conversation, _, other_answer = _answer(other, "snow here?", "theirs")
        # Their own conversation with the owner's answer id: not in it.
        crossed = f"/api/conversations/{other_conversation}/messages/{answer}/feedback"
        assert other.put(crossed, json={"rating": "down"}).status_code == 404
        assert (
            owner.put(
                f"/api/conversations/{conversation}/messages/{other_answer}/feedback",
                json={"rating": "down"},
            ).status_code
            == 404
        )

        # A question is not an answer; made-up, traversal and malformed ids are refused.
        asked = f"/api/conversations/{conversation}/messages/{question}/feedback"
        assert owner.put(asked, json={"rating": "up"}).status_code == 404
        for bad in (
            f"/api/conversations/{conversation}/messages/999999999/feedback",
            f"/api/conversations/..%2F..%2Fetc/messages/{answer}/feedback",
        ):
            assert owner.put(bad, json={"rating": "up"}).status_code == 404, bad
        assert (
            owner.put(
                f"/api/conversations/{conversation}/messages/0/feedback", json={"rating": "up"}
            ).status_code
            == 422
        )
        assert owner.put(url, json={"rating": "meh"}).status_code == 422
        assert owner.put(url, json={"rating": "up", "note": "x" * 2_001}).status_code == 422

        # The conversation deleted: its answers' feedback goes with it.
        assert owner.delete(f"/api/conversations/{conversation}").status_code == 204
        assert owner.put(url, json={"rating": "up"}).status_code == 404
        assert owner.get("/api/users/me/usage").json()["feedback"] == {}
