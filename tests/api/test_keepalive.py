"""Quiet streams get `: keep-alive` comments, which clients skip (issue 12)."""

from __future__ import annotations

from pathlib import Path

import openai

from tests.conftest import StartServer, write_replies
from tests.support.agent_script import slow_turn, upload


def test_a_stream_waiting_on_code_gets_keepalive_comments(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", slow_turn("Q-QUIET")),
        STREAM_KEEPALIVE_SECONDS="0.3",
    )
    upload(server, "quiet")
    body = {"message": "Q-QUIET compute slowly", "session_id": "quiet", "stream": True}
    seen: list[str] = []
    with server.client(timeout=60) as http, http.stream("POST", "/api/chat", json=body) as reply:
        lines = reply.iter_lines()
        for line in lines:
            seen.append(line)
            if line == ": keep-alive" and "event: code" in seen:
                break  # a comment while the sandbox runs the 20 s code
    assert seen[-1] == ": keep-alive", seen
    assert seen.index("event: code") < len(seen) - 1


def test_the_openai_sdk_reads_through_keepalive_comments(
    start_server: StartServer, tmp_path: Path
) -> None:
    words = "one two three four"
    replies = [{"content": words, "token_delay": 0.5, "repeat": True}]
    server = start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", replies),
        STREAM_KEEPALIVE_SECONDS="0.2",
    )
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    stream = client.chat.completions.with_raw_response.create(
        model="scripted", messages=[{"role": "user", "content": "count"}], stream=True
    )
    raw = stream.http_response.read().decode()
    assert ": keep-alive" in raw  # the tokens came 0.5 s apart: comments between them
    again = client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "count"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in again if c.choices)
    assert text == words
