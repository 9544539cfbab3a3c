"""Branches over the API: edit a message or regenerate an answer, and the session's data
follows the branch (variables rolled back, the sandbox restarted from them)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import scripted_server
from tests.support.agent_script import react_turn, sse_events
from tests.support.live_server import LiveServer

SESSION = "branchy"
TURNS = {
    "alpha": "x = 1\nprint('x is', x)\n",
    "bravo": "x = 2\nprint('x is', x)\n",
    "charlie": "print('x is', x)\n",
    "delta": "x = 5\nprint('x is', x)\n",
    "echo": "print('x is', x)\n",
    "foxtrot": "print('x is', x)\n",
    "golf": "x = 7\nprint('x is', x)\n",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    replies = [r for tag, code in TURNS.items() for r in react_turn(tag, code, "Done.")]
    replies += react_turn("golf", TURNS["golf"], "Done again.")  # golf is regenerated
    replies.append({"when": "Q-BR-HELLO", "content": "Hello.", "repeat": True})
    with scripted_server(tmp_path_factory.mktemp("branches"), replies) as live:
        yield live


def ask(
    http: httpx.Client, tag: str, parent: int | None = None, session: str = SESSION
) -> dict[str, Any]:
    """One streamed ReAct turn; returns its events by name (the last of each)."""
    body: dict[str, Any] = {"message": f"{tag}: run it", "session_id": session, "stream": True}
    body["agent_type"] = "react"
    if parent is not None:
        body["parent_message_id"] = parent
    with http.stream("POST", "/api/chat", json=body) as reply:
        assert reply.status_code == 200, reply.read()
        return dict(sse_events(reply.iter_lines()))


def react_prompts(server: LiveServer) -> list[list[dict[str, Any]]]:
    """The messages of each ReAct prompt the turns sent, oldest first."""
    log = (server.data_dir / "logs" / "prompts.jsonl").read_text().splitlines()
    return [record["prompt"] for record in map(json.loads, log) if record.get("stage") == "react"]


def branch(http: httpx.Client, leaf: int | None = None, session: str = SESSION) -> dict[str, Any]:
    conversations = http.get("/api/conversations").json()
    found = next(c for c in conversations if c["session_id"] == session)
    params = {"leaf": leaf} if leaf is not None else {}
    reply = http.get(f"/api/conversations/{found['id']}", params=params)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def test_an_edit_rolls_the_data_back_and_each_branch_keeps_its_own(
    server: LiveServer, tmp_path: Path
) -> None:
    with server.client(timeout=120) as http:
        for tag in ("alpha", "bravo"):
            assert ask(http, tag)["execution"]["ok"]
        assert ask(http, "charlie")["execution"]["stdout"] == "x is 2\n"
        first = branch(http)
        user1, answer1, user2, _, _, answer3 = first["messages"]
        assert [m["role"] for m in first["messages"]] == ["user", "assistant"] * 3
        assert user2["parent_id"] == answer1["id"] and user1["parent_id"] is None

        # Edit turn 2: its new text follows turn 1's answer; the data is turn 1's.
        assert ask(http, "delta", parent=answer1["id"])["execution"]["stdout"] == "x is 5\n"
        assert ask(http, "echo")["execution"]["stdout"] == "x is 5\n"
        second = branch(http)
        edited = second["messages"][2]
        assert edited["content"] == "delta: run it" and edited["siblings"] == [
            user2["id"],
            edited["id"],
        ]
        assert len(second["branches"]) == 2

        # The edited turn's model saw its branch only: the history and the graph's memory
        # (forked from turn 1's checkpoint) have turn 1 and never the replaced turn 2.
        react = [p for p in react_prompts(server) if "delta: run it" in p[-1]["content"]]
        seen = "\n".join(str(m["content"]) for m in react[0])
        assert "Q: alpha: run it" in seen and "bravo" not in seen and "charlie" not in seen
        echo = [p for p in react_prompts(server) if "echo: run it" in p[-1]["content"]]
        assert "Q: delta: run it" in "\n".join(str(m["content"]) for m in echo[0])

        # Back on the first branch, x is what that branch made it.
        assert ask(http, "foxtrot", parent=answer3["id"])["execution"]["stdout"] == "x is 2\n"
        again = branch(http, leaf=user2["id"])
        assert [m["content"] for m in again["messages"] if m["role"] == "user"] == [
            "alpha: run it",
            "bravo: run it",
            "charlie: run it",
            "foxtrot: run it",
        ]

        # Each branch's export reruns to that branch's numbers.
        printed = {}
        for name, leaf in (("first", user2["id"]), ("second", edited["id"])):
            reply = http.get(
                f"/api/sessions/{SESSION}/export", params={"format": "py", "leaf": leaf}
            )
            assert reply.status_code == 200, reply.text
            script = tmp_path / f"{name}.py"
            script.write_text(reply.text)
            ran = subprocess.run(
                [sys.executable, script.name], cwd=tmp_path, capture_output=True, text=True
            )
            assert ran.returncode == 0, ran.stderr
            printed[name] = [line for line in ran.stdout.splitlines() if line.startswith("x is")]
        assert printed == {
            "first": ["x is 1", "x is 2", "x is 2", "x is 2"],
            "second": ["x is 1", "x is 5", "x is 5"],
        }


def test_regenerating_keeps_the_sibling_answers(server: LiveServer) -> None:
    with server.client(timeout=120) as http:
        ask(http, "golf")
        shown = branch(http)
        question = shown["messages"][-2]
        assert question["role"] == "user"
        body = {
            "message": question["content"],
            "session_id": SESSION,
            "parent_message_id": question["id"],
            "agent_type": "react",
        }
        reply = http.post("/api/chat", json=body)
        assert reply.status_code == 200, reply.text
        after = branch(http)
        answers = after["messages"][-1]["siblings"]
        assert len(answers) == 2 and shown["messages"][-1]["id"] in answers
        assert after["messages"][-2]["id"] == question["id"]  # no new question was stored
        assert after["messages"][-1]["content"].startswith("Done again.")
        # Other text with the user's own message as parent is not a regeneration.
        body["message"] = "something else"
        refused = http.post("/api/chat", json=body)
        assert refused.status_code == 400 and "parent_message_id" in refused.text


def test_a_parent_from_elsewhere_is_not_found(server: LiveServer) -> None:
    with server.client() as admin:
        admin.post("/api/users", json={"username": "brenda", "password": "brenda-pass-1"})
        hello = {"message": "Q-BR-HELLO", "session_id": "mine", "agent_type": "chat"}
        assert admin.post("/api/chat", json=hello).status_code == 200
        mine = branch(admin, session="mine")["messages"][0]["id"]
        for body in (
            {"message": "hi", "session_id": "mine", "parent_message_id": 10**9},
            {"message": "hi", "session_id": "never-seen", "parent_message_id": mine},
            {"message": "hi", "parent_message_id": mine},  # a new conversation has none
        ):
            reply = admin.post("/api/chat", json=body)
            assert reply.status_code == 404, reply.text
        conversation = branch(admin, session="mine")["id"]
        assert admin.get(f"/api/conversations/{conversation}?leaf=999999").status_code == 404
        export = "/api/sessions/mine/export"
        assert admin.get(export, params={"leaf": 999999}).status_code == 404
        assert admin.get(export, params={"leaf": mine}).status_code == 200
    with server.client(server.token("brenda", "brenda-pass-1")) as other:
        body = {"message": "hi", "session_id": "mine", "parent_message_id": mine}
        assert other.post("/api/chat", json=body).status_code == 404  # admin's session
        assert other.get(f"/api/conversations/{conversation}?leaf={mine}").status_code == 404
        assert other.get(export, params={"leaf": mine}).status_code == 404
