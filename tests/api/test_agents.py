"""The agents through both streaming APIs: a real SSE client and the openai SDK."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import psycopg
import pytest
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from tests.conftest import StartServer, scripted_server, write_replies
from tests.support.agent_script import (
    CODE,
    SLOW_STARTED,
    react_turn,
    slow_turn,
    sse_events,
    upload,
)
from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("agents")
    replies = [*react_turn("Q-SSE"), *react_turn("Q-SDK"), *react_turn("Q-JSON")]
    replies += [*react_turn("Q-SDK-JSON"), *react_turn("Q-LANGCHAIN")]
    replies.append({"when": "Q-HELLO", "content": "Hi! How can I help?"})
    with scripted_server(folder, replies) as live:
        yield live


def test_api_chat_streams_the_steps_in_order(server: LiveServer) -> None:
    upload(server, "sse")
    events: list[tuple[str, dict[str, Any]]] = []
    body = {"message": "Q-SSE what is the mean price in sales.csv?", "session_id": "sse",
            "stream": True}  # fmt: skip
    with server.client(timeout=120) as http, http.stream("POST", "/api/chat", json=body) as reply:
        assert reply.status_code == 200
        events.extend(sse_events(reply.iter_lines()))

    kinds = [name for name, _ in events]
    assert kinds[:5] == ["router", "tool_call", "code", "execution", "plot"]
    assert set(kinds[5:-2]) == {"token"} and kinds[-2:] == ["final", "done"]
    data = dict(events)
    assert data["router"]["agent_type"] == "react" and "csv" in data["router"]["reason"]
    assert data["tool_call"]["tool"] == "python_coder"
    assert data["code"]["code"].endswith(CODE)
    assert data["execution"]["ok"] and data["execution"]["stdout"] == "mean price: 20.0\n"
    plot = data["plot"]
    assert plot["path"].startswith("outputs/") and plot["path"].endswith(".png")
    assert plot["url"] == f"/api/sessions/sse/files/{plot['path']}"
    assert "".join(d["text"] for k, d in events if k == "token") == "The mean price is 20.0."
    assert data["final"]["text"] == "The mean price is 20.0."
    assert data["final"]["iterations"] == 1 and data["final"]["files"] == [plot["path"]]
    # Issue 14: the answer's number cites the run that printed it, and its output line.
    (citation,) = data["final"]["citations"]
    assert citation["text"] == "20.0" and citation["kind"] == "computed"
    assert data["final"]["text"][citation["start"] : citation["end"]] == "20.0"
    assert citation["run_id"] == data["execution"]["run_id"]
    assert citation["output_line"] == "mean price: 20.0" and citation["line"] == 1
    assert citation["code"] == data["code"]["code"]
    with server.client() as http:
        assert http.get(plot["url"]).headers["content-type"] == "image/png"


def test_the_openai_sdk_reads_the_answer_and_ignores_the_steps(server: LiveServer) -> None:
    upload(server, "sdk")
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    stream = client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "Q-SDK what is the mean price in sales.csv?"}],
        stream=True,
        extra_body={"session_id": "sdk"},
    )
    content, steps, citations = [], [], []
    for chunk in stream:
        citations.extend(((chunk.model_extra or {}).get("metadata") or {}).get("citations", []))
        step = (chunk.model_extra or {}).get("agent_event")
        if step:
            steps.append(step["type"])
            assert chunk.choices[0].delta.content is None  # nothing for a plain client to show
        elif chunk.choices and chunk.choices[0].delta.content:
            content.append(chunk.choices[0].delta.content)
    assert "".join(content) == "The mean price is 20.0."
    assert steps == ["tool_call", "code", "execution", "plot"]
    # The last chunk's `metadata` cites where the number came from (issue 14).
    assert [(c["text"], c["output_line"]) for c in citations] == [("20.0", "mean price: 20.0")]


def test_clients_read_an_agent_answer_whose_metadata_holds_citations(server: LiveServer) -> None:
    """OpenAI's `metadata` is string pairs; an agent turn's holds a list. Typed clients cope."""
    upload(server, "sdk-json")
    upload(server, "langchain")
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    completion = client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "Q-SDK-JSON what is the mean price in sales.csv?"}],
        extra_body={"session_id": "sdk-json", "agent_type": "react"},
    )
    assert completion.choices[0].message.content == "The mean price is 20.0."
    metadata: Any = completion.metadata
    assert [c["output_line"] for c in metadata["citations"]] == ["mean price: 20.0"]
    chat = ChatOpenAI(
        model="scripted",
        base_url=f"{server.url}/v1",
        api_key=SecretStr(server.token()),
        max_retries=0,
        extra_body={"session_id": "langchain", "agent_type": "react"},
    )
    reply = chat.invoke("Q-LANGCHAIN what is the mean price in sales.csv?")
    assert reply.content == "The mean price is 20.0."


def test_a_json_answer_carries_the_steps_in_metadata(server: LiveServer, tmp_path: Path) -> None:
    upload(server, "json")
    with server.client(timeout=120) as http:
        body = {"message": "Q-JSON what is the mean price in sales.csv?", "session_id": "json"}
        answer = http.post("/api/chat", json=body).json()
    assert answer["answer"] == "The mean price is 20.0." and answer["agent_type"] == "react"
    metadata = answer["metadata"]
    assert metadata["tool_calls"] == [{"tool": "python_coder", "input": "Q-JSON mean price"}]
    assert metadata["code"][0].endswith(CODE) and metadata["iterations"] == 1
    assert metadata["llm_calls"] == 3  # react, generate, answer (the turn's, written once)
    assert len(metadata["files"]) == 1 and metadata["files"][0].endswith(".png")
    assert [(c["text"], c["kind"], c["output_line"]) for c in answer["citations"]] == [
        ("20.0", "computed", "mean price: 20.0")
    ]


def test_a_plain_question_is_chat_and_an_explicit_agent_type_wins(server: LiveServer) -> None:
    with server.client(timeout=60) as http:
        hello = http.post("/api/chat", json={"message": "Q-HELLO hello there"}).json()
        forced = http.post(
            "/api/chat", json={"message": "Q-UNSCRIPTED hello there", "agent_type": "react"}
        )
    assert hello["agent_type"] == "chat" and hello["answer"] == "Hi! How can I help?"
    assert "a plain question" in hello["metadata"]["route_reason"]
    # The explicit type wins even for a greeting: ReAct asks the model, which has no reply.
    assert forced.status_code == 503 and "no reply left" in forced.json()["detail"]


def test_a_restart_mid_conversation_continues_from_the_checkpoint(
    start_server: StartServer, tmp_path: Path, database_url: str
) -> None:
    replies = [
        # First: after the restart the script starts over, and the second turn's prompt
        # mentions Q-MEM1 too (that is the point), so its own reply must come first.
        {"when": ["[stage: react]", "Q-MEM2"], "content": "Final Answer: It was 20.0."},
        *react_turn("Q-MEM1"),
    ]
    server = start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", replies), DATABASE_URL=database_url
    )
    upload(server, "memory")
    with server.client(timeout=120) as http:
        first = http.post(
            "/api/chat",
            json={"message": "Q-MEM1 what is the mean price in sales.csv?", "session_id": "memory"},
        ).json()
    assert first["answer"] == "The mean price is 20.0."

    server.stop()
    server.start()
    with server.client(timeout=120) as http:
        second = http.post(
            "/api/chat",
            json={"message": "Q-MEM2 and what was the csv mean again?", "session_id": "memory"},
        ).json()
    assert second["answer"] == "It was 20.0." and second["agent_type"] == "react"
    log = (server.data_dir / "logs" / "prompts.jsonl").read_text().splitlines()
    react = [json.loads(line) for line in log if '"stage": "react"' in line and "Q-MEM2" in line]
    prompt = react[0]["prompt"][-1]["content"]
    # The graph's memory of the first turn (its tool step and result) came from the checkpoint.
    assert "Earlier turns in this session:" in prompt
    assert "python_coder(Q-MEM1 mean price) → mean price: 20.0" in prompt  # not "Output:"
    assert "A: The mean price is 20.0." in prompt
    # The checkpoints live beside the store: in DATA_DIR for SQLite, else in PostgreSQL.
    on_sqlite = database_url.startswith("sqlite")
    assert (server.data_dir / "agent_checkpoints.sqlite3").exists() == on_sqlite
    if not on_sqlite:
        with psycopg.connect(database_url) as db:
            threads = db.execute("SELECT DISTINCT thread_id FROM checkpoints").fetchall()
        assert ("react:u1-memory",) in threads  # the admin's session key


def test_a_disconnect_stops_the_graph_and_the_session_stays_usable(
    start_server: StartServer, tmp_path: Path
) -> None:
    replies = [*slow_turn("Q-SLOW"), *react_turn("Q-AFTER")]
    server = start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", replies))
    upload(server, "cut")
    body = {"message": "Q-SLOW compute the csv mean slowly", "session_id": "cut", "stream": True}
    with server.client(timeout=120) as http:
        with http.stream("POST", "/api/chat", json=body) as reply:
            lines = reply.iter_lines()  # kept: a discarded iterator closes the response
            for line in lines:
                if line == "event: code":
                    break
            # Hang up once python_coder's sandbox is running the 20 s code.
            wait_for((server.data_dir / "scratch/u1-cut" / SLOW_STARTED).exists, timeout=60)
        started = time.monotonic()
        after = http.post(
            "/api/chat", json={"message": "Q-AFTER what is the csv mean?", "session_id": "cut"}
        ).json()
        took = time.monotonic() - started
        conversation = http.get(f"/api/conversations/{after['conversation_id']}").json()
    # The cancelled run did not hold the session's sandbox for its 20 s.
    assert after["answer"] == "The mean price is 20.0." and took < 15
    cancelled = next(m for m in conversation["messages"] if m["role"] == "assistant")
    assert cancelled["metadata"]["finish_reason"] == "cancelled"
    assert cancelled["metadata"]["agent_type"] == "react"
