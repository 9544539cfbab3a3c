"""Bounded turns: AGENT_MAX_LLM_CALLS and AGENT_TURN_TIMEOUT stop a turn politely (issue 12)."""

from __future__ import annotations

from pathlib import Path

import openai

from tests.conftest import StartServer, write_replies
from tests.support.agent_script import SLOW_STARTED, react_turn, slow_turn, upload


def test_the_llm_call_limit_ends_the_turn_with_the_last_result_and_length(
    start_server: StartServer, tmp_path: Path
) -> None:
    # react (1) and generate (2); python_coder's answer is refused, after its code ran.
    replies = react_turn("Q-LIMIT", answer="The mean price is 20.0.")
    server = start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", replies), AGENT_MAX_LLM_CALLS="2"
    )
    upload(server, "lim")
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    chunks = list(
        client.chat.completions.create(
            model="scripted",
            messages=[{"role": "user", "content": "Q-LIMIT what is the mean price in sales.csv?"}],
            stream=True,
            extra_body={"session_id": "lim", "agent_type": "react"},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish == ["length"], chunks[-3:]
    assert text.startswith(
        "I had to stop: this turn reached its limit of 2 LLM calls (AGENT_MAX_LLM_CALLS)."
    ), text
    # The run that worked is the result: its output and plot, with no answer written from it.
    assert "from the last step that worked:\n\n**Result**\n\n```text\nmean price: 20.0\n```" in text
    assert "**Plots**" in text and "The mean price is 20.0." not in text
    with server.client() as http:
        conversation = http.get("/api/conversations").json()[0]
        stored = http.get(f"/api/conversations/{conversation['id']}").json()["messages"][-1]
    assert stored["content"] == text
    assert stored["metadata"]["finish_reason"] == "length"
    assert [s["type"] for s in stored["metadata"]["steps"]][:2] == ["tool_call", "code"]


def test_the_time_limit_stops_the_graph_and_its_sandbox_run(
    start_server: StartServer, tmp_path: Path
) -> None:
    replies = [*slow_turn("Q-SLOW"), *react_turn("Q-AFTER")]
    server = start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", replies), AGENT_TURN_TIMEOUT="5"
    )
    upload(server, "late")
    with server.client(timeout=120) as http:
        stopped = http.post(
            "/api/chat",
            json={
                "message": "Q-SLOW compute the mean slowly",
                "session_id": "late",
                "agent_type": "react",
            },
        ).json()
        assert stopped["answer"].startswith(
            "I had to stop: this turn reached its time limit of 5 s (AGENT_TURN_TIMEOUT)."
        ), stopped
        assert "No step had finished yet" in stopped["answer"]
        # The sandbox run was killed, not left to finish its 20 s: the next turn runs now.
        assert (server.data_dir / "scratch/u1-late" / SLOW_STARTED).exists()
        after = http.post(
            "/api/chat", json={"message": "Q-AFTER what is the mean price?", "session_id": "late"}
        ).json()
        assert after["answer"] == "The mean price is 20.0.", after
        conversation = http.get(f"/api/conversations/{after['conversation_id']}").json()
    first = next(m for m in conversation["messages"] if m["role"] == "assistant")
    assert first["metadata"]["finish_reason"] == "length"
    executions = [s for s in first["metadata"]["steps"] if s["type"] == "execution"]
    assert not any("too late" in (s.get("stdout") or "") for s in executions)
