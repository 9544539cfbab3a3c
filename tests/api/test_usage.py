"""Usage per user (issue 30): each turn's model calls and tokens and each sandbox run's
seconds are counted for the user who ran them; a user reads their own, an admin
everyone's; a user past a daily limit gets a 429 that names it and when it resets."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import StartServer, write_replies
from tests.support.agent_script import SALES, react_turn
from tests.support.live_server import LiveServer

REVIEW = {"when": "[stage: review]", "content": '{"answers_question": true}', "repeat": True}
CHAT = {"when": "Q-CHAT", "content": "Hello there.", "repeat": True}
LONG = {"when": "Q-LONG", "content": " ".join(["token"] * 400), "repeat": True}
# About 1.2 CPU seconds in the sandbox, whatever the machine.
BUSY = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.2:\n    pass\n"


@dataclass
class Person:
    id: int
    name: str
    http: httpx.Client


@pytest.fixture
def people() -> Iterator[list[Person]]:
    made: list[Person] = []
    yield made
    for person in made:
        person.http.close()


def _person(server: LiveServer, admin: httpx.Client, name: str, people: list[Person]) -> Person:
    password = f"{name}-password-1234"
    created = admin.post("/api/users", json={"username": name, "password": password})
    assert created.status_code == 201, created.text
    http = server.client(server.token(name, password), timeout=120)
    people.append(Person(created.json()["id"], name, http))
    uploaded = http.post(
        "/api/upload", data={"session_id": "s"}, files={"file": ("sales.csv", SALES)}
    )
    assert uploaded.status_code == 201, uploaded.text
    return people[-1]


def _turn(person: Person, tag: str, agent: str = "react") -> httpx.Response:
    return person.http.post(
        "/api/chat",
        json={"message": f"{tag} what is the mean price?", "session_id": "s", "agent_type": agent},
    )


def _today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


@pytest.fixture
def server(start_server: StartServer, tmp_path: Path) -> LiveServer:
    replies = [
        *react_turn("Q-ALICE"),
        *react_turn("Q-BOB"),
        *react_turn("Q-BOB-AGAIN"),
        *react_turn("Q-NEVER"),
        REVIEW,
        CHAT,
        LONG,
    ]
    return start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", replies))


def test_two_users_turns_are_counted_apart_and_read_by_their_owner_or_an_admin(
    server: LiveServer, people: list[Person]
) -> None:
    with server.client() as admin:
        alice, bob = _person(server, admin, "alice", people), _person(server, admin, "bob", people)
        assert _turn(alice, "Q-ALICE").json()["answer"] == "The mean price is 20.0."
        assert _turn(bob, "Q-BOB").json()["answer"] == "The mean price is 20.0."
        assert _turn(bob, "Q-CHAT", "chat").json()["answer"] == "Hello there."

        mine = alice.http.get("/api/users/me/usage").json()
        today = mine["today"]
        assert mine["user_id"] == alice.id and today["day"] == _today()
        assert today["turns"] == 1 and today["llm_calls"] >= 2, today
        assert today["prompt_tokens"] > 0 and today["completion_tokens"] > 0
        assert today["tokens"] == today["prompt_tokens"] + today["completion_tokens"]
        assert today["sandbox_runs"] >= 1  # the file's loading and the code
        assert 0 < today["sandbox_cpu_seconds"] <= today["sandbox_wall_seconds"] + 0.05, today
        assert len(mine["days"]) == 14 and mine["days"][-1] == today
        assert all(day["turns"] == 0 for day in mine["days"][:-1])
        assert {k: v for k, v in mine["total"].items()} == {
            k: v for k, v in today.items() if k != "day"
        }
        assert mine["disk_bytes"] >= len(SALES)
        assert mine["limits"] == {
            "max_tokens_per_day": 0,
            "max_sandbox_seconds_per_day": 0,
            "max_disk_mb": 20480,
        }
        assert mine["resets_at"] > time.time()

        bobs = bob.http.get("/api/users/me/usage", params={"days": 1}).json()
        assert bobs["user_id"] == bob.id and len(bobs["days"]) == 1
        assert bobs["today"]["turns"] == 2  # the agent's and plain chat's
        assert bobs["today"]["llm_calls"] == today["llm_calls"] + 1
        assert bobs["today"]["sandbox_runs"] == today["sandbox_runs"]
        # Alice's count did not move with Bob's turns.
        assert alice.http.get("/api/users/me/usage").json()["today"]["turns"] == 1

        # A user reads only themselves: another's id, an unknown id, everyone's.
        assert alice.http.get(f"/api/users/{alice.id}/usage").json()["today"] == today
        for path in (f"/api/users/{bob.id}/usage", "/api/users/999999/usage", "/api/usage"):
            refused = alice.http.get(path)
            assert refused.status_code == 403, (path, refused.text)
        for path in ("/api/users/0/usage", "/api/users/%2E%2E/usage", "/api/users/%2F/usage"):
            assert alice.http.get(path).status_code in (404, 422), path
        assert alice.http.get("/api/users/../usage").status_code == 403  # that is /api/usage
        for days in (0, 367, -1):
            assert alice.http.get("/api/users/me/usage", params={"days": days}).status_code == 422
        assert len(alice.http.get("/api/users/me/usage?days=366").json()["days"]) == 366

        # An admin reads anyone's, and everyone's today.
        assert admin.get(f"/api/users/{bob.id}/usage").json()["today"] == bobs["today"]
        missing = admin.get("/api/users/999999/usage")
        assert missing.status_code == 404 and missing.json()["code"] == "user_not_found"
        overview = admin.get("/api/usage").json()
        assert overview["day"] == _today()
        by_name = {row["username"]: row for row in overview["users"]}
        assert by_name["alice"]["today"]["turns"] == 1 and by_name["bob"]["today"]["turns"] == 2
        assert by_name["admin"]["today"]["turns"] == 0
        assert by_name["alice"]["total"]["tokens"] == today["tokens"]

        # A deleted user's usage goes with them.
        assert admin.delete(f"/api/users/{alice.id}").status_code == 204
        assert admin.get(f"/api/users/{alice.id}/usage").status_code == 404
        assert "alice" not in {row["username"] for row in admin.get("/api/usage").json()["users"]}


def _refusal(response: httpx.Response, setting: str, limit: str) -> dict[str, Any]:
    assert response.status_code == 429, response.text
    body: dict[str, Any] = response.json()
    message = body["error"]["message"] if "error" in body else body["detail"]
    assert setting in message and f"daily limit of {limit}" in message, message
    assert "00:00 UTC" in message, message
    retry = int(response.headers["Retry-After"])
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    assert 0 <= retry <= 86400 and abs(time.time() + retry - (midnight + 86400)) < 5, retry
    return body


def test_a_user_over_a_daily_limit_gets_a_429_naming_it_and_the_others_do_not(
    server: LiveServer, people: list[Person]
) -> None:
    with server.client() as admin:
        alice, bob = _person(server, admin, "alice", people), _person(server, admin, "bob", people)
        assert _turn(alice, "Q-ALICE").status_code == 200
        limited = admin.patch(f"/api/users/{alice.id}", json={"limits": {"max_tokens_per_day": 5}})
        assert limited.json()["limits"]["max_tokens_per_day"] == 5
        assert alice.http.get("/api/users/me/usage").json()["limits"]["max_tokens_per_day"] == 5

        body = _refusal(_turn(alice, "Q-NEVER"), "USER_MAX_TOKENS_PER_DAY", "5")
        assert body["code"] == "daily_token_limit"
        assert _refusal(_turn(alice, "Q-CHAT", "chat"), "USER_MAX_TOKENS_PER_DAY", "5")
        client = openai.OpenAI(
            base_url=f"{server.url}/v1",
            api_key=alice.http.headers["Authorization"].removeprefix("Bearer "),
            max_retries=0,
        )
        with pytest.raises(openai.RateLimitError) as refused:
            client.chat.completions.create(
                model="scripted", messages=[{"role": "user", "content": "Q-CHAT hi"}]
            )
        sdk_response: Any = refused.value.response  # the SDK's own httpx
        error = _refusal(sdk_response, "USER_MAX_TOKENS_PER_DAY", "5")["error"]
        assert error["code"] == "daily_token_limit" and error["type"], error
        # Code alone uses no tokens: it still runs.
        ran = alice.http.post(
            "/api/tools/python_coder", json={"session_id": "s", "code": "print(1)"}
        )
        assert ran.status_code == 200 and ran.json()["success"], ran.text

        # Bob is not limited by Alice's limit; his own sandbox limit stops his code.
        assert _turn(bob, "Q-BOB").json()["answer"] == "The mean price is 20.0."
        admin.patch(f"/api/users/{bob.id}", json={"limits": {"max_sandbox_seconds_per_day": 1}})
        busy = bob.http.post("/api/tools/python_coder", json={"session_id": "s", "code": BUSY})
        assert busy.status_code == 200 and busy.json()["success"], busy.text
        used = bob.http.get("/api/users/me/usage").json()["today"]
        assert used["sandbox_cpu_seconds"] >= 1.0, used
        assert used["sandbox_cpu_seconds"] <= used["sandbox_wall_seconds"] + 0.05, used
        again = bob.http.post("/api/tools/python_coder", json={"session_id": "s", "code": "1"})
        body = _refusal(again, "USER_MAX_SANDBOX_SECONDS_PER_DAY", "1")
        assert body["code"] == "daily_sandbox_limit"
        _refusal(_turn(bob, "Q-BOB-AGAIN"), "USER_MAX_SANDBOX_SECONDS_PER_DAY", "1")
        # Plain chat runs no code: it still answers, and Alice's code still runs.
        assert _turn(bob, "Q-CHAT", "chat").json()["answer"] == "Hello there."
        ran = alice.http.post("/api/tools/python_coder", json={"session_id": "s", "code": "2"})
        assert ran.status_code == 200, ran.text

        # Lifting the limit (null: the server's default, unlimited) lets Alice in again.
        admin.patch(f"/api/users/{alice.id}", json={"limits": {}})
        assert _turn(alice, "Q-CHAT", "chat").status_code == 200


def test_a_turn_stops_where_the_daily_tokens_end_not_after(
    server: LiveServer, people: list[Person]
) -> None:
    """Issue 40: the limit was checked only before a turn, so one long answer overran it."""
    with server.client() as admin:
        carol = _person(server, admin, "carol", people)
        admin.patch(f"/api/users/{carol.id}", json={"limits": {"max_tokens_per_day": 60}})
    body = {"message": "Q-LONG tell me everything", "session_id": "s", "agent_type": "chat",
            "stream": True}  # fmt: skip
    with carol.http.stream("POST", "/api/chat", json=body) as reply:
        assert reply.status_code == 200
        events = [line for line in reply.iter_lines() if line.startswith("data: ")]
    tokens = [event for event in events if '"type":"token"' in event]
    assert 20 <= len(tokens) <= 60, len(tokens)  # not the 400 it would have streamed
    error = next(event for event in events if "daily_token_limit" in event)
    assert "USER_MAX_TOKENS_PER_DAY" in error and "00:00 UTC" in error, error
    used = carol.http.get("/api/users/me/usage").json()["today"]
    assert 60 <= used["prompt_tokens"] + used["completion_tokens"] <= 80, used
    assert _turn(carol, "Q-CHAT", "chat").status_code == 429
