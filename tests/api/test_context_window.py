"""Every prompt fits the model's window: a 30-turn session against an Ollama that cuts.

The stand-in (tests/support/truncating_ollama.py) loads the model with the request's
`num_ctx` (4,096 when none is sent) and cuts a longer prompt the way Ollama does,
silently. The server must send `num_ctx` on every call and fit each prompt itself:
the oldest history goes first, the system prompt and the question always arrive,
and the turn says what it left out. A `/v1` client's own messages that cannot fit
get OpenAI's 400 `context_length_exceeded`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import openai
import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from tests.conftest import ADMIN_PASSWORD
from tests.support.agent_script import upload
from tests.support.live_server import LiveServer, free_port
from tests.support.truncating_ollama import TruncatingOllama

MODEL = "standin:7b"
TURNS = 30
AGENT_TURNS = {7, 18, 29}  # the others are plain chat
# A long answer: the conversation outgrows the window within a dozen turns.
LONG_ANSWER = " ".join(f"Sentence {n} of a long and careful answer about sales." for n in range(60))


def _reply(messages: list[dict[str, Any]]) -> str:
    """The stand-in model: ReAct and python_coder by stage, long prose otherwise."""
    last = str(messages[-1].get("content") or "")
    if "[stage: react]" in last:
        if "Observation:" in last:
            return "Thought: I know the answer\nFinal Answer: The total is 40."
        tag = re.search(r"Question: (Q-\d\d)", last)
        asked = tag.group(1) if tag else "Q-??"
        return f"Thought: compute it\nAction: python_coder\nAction Input: {asked} total price"
    if "[stage: generate]" in last:
        return "```python\nprint('total price:', df1['price'].sum())\n```"
    if "[stage: answer]" in last:
        return "The total price is 40."
    return LONG_ANSWER


@pytest.fixture(scope="module")
def ollama() -> Iterator[TruncatingOllama]:
    with TruncatingOllama(free_port(), MODEL, _reply) as server:
        yield server


@pytest.fixture(scope="module")
def server(
    ollama: TruncatingOllama, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("context")
    live = LiveServer(
        root / "data",
        LLM_BACKEND="ollama",
        OLLAMA_HOST=ollama.url,
        OLLAMA_MODEL=MODEL,
        ADMIN_PASSWORD=ADMIN_PASSWORD,
        MODEL_PROBE="false",  # the stand-in answers every call alike
    )
    live.start()
    yield live
    live.stop()


def _system_text(body: dict[str, Any]) -> str:
    systems = [m for m in body["messages"] if m["role"] == "system"]
    return str(systems[0]["content"]) if systems else ""


def test_a_30_turn_session_never_exceeds_the_window(
    server: LiveServer, ollama: TruncatingOllama
) -> None:
    upload(server, "long")
    notices: list[dict[str, Any]] = []
    with server.client(timeout=120) as http:
        for turn in range(1, TURNS + 1):
            first = len(ollama.calls)
            question = f"Q-{turn:02d}: tell me about the sales, turn {turn}, in detail."
            body: dict[str, Any] = {"message": question, "session_id": "long"}
            body["agent_type"] = "react" if turn in AGENT_TURNS else "chat"
            answer = http.post("/api/chat", json=body)
            assert answer.status_code == 200, answer.text
            conversation = answer.json()["conversation_id"]
            calls = ollama.calls[first:]
            assert calls, f"turn {turn} made no model call"
            for call in calls:
                # Sent every time, always the same: the model is never reloaded for it.
                assert call.body["options"]["num_ctx"] == 8192
                assert not call.truncated, (
                    f"turn {turn}: the model read {call.read_tokens} of {call.sent_tokens} "
                    f"tokens ({call.dropped_messages} messages dropped, {call.cut_tokens} cut)"
                )
                last = str(call.body["messages"][-1]["content"])
                assert f"Q-{turn:02d}" in last  # the question always arrives
            if turn in AGENT_TURNS:
                assert all("python_coder" in _system_text(c.body) for c in calls)
                assert answer.json()["answer"].startswith("The total")
        stored = http.get(f"/api/conversations/{conversation}").json()["messages"]
    for message in stored:  # the UI draws a turn's steps from these
        steps = (message.get("metadata") or {}).get("steps") or []
        notices += [step for step in steps if step["type"] == "context"]
    sent = [call.sent_tokens for call in ollama.calls]
    assert max(sent) > 4096, "the session never outgrew Ollama's default window"
    # The trim is reported in the turns that needed it, in plain words.
    assert notices and all(n["dropped_messages"] > 0 for n in notices)
    assert "context window of 8,192 tokens" in notices[0]["message"]


def test_an_openai_clients_own_messages_that_cannot_fit_get_openais_400(
    server: LiveServer,
) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    huge = "numbers " + " ".join(str(n) for n in range(9000))
    with pytest.raises(openai.BadRequestError) as raised:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": huge}])
    error = raised.value.body
    assert isinstance(error, dict)
    assert error["code"] == "context_length_exceeded" and error["param"] == "messages"
    assert error["message"].startswith("This model's maximum context length is 8192 tokens.")
    assert "Please reduce the length of the messages." in error["message"]
    # One that fits is answered.
    reply = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hello"}]
    )
    assert reply.choices[0].message.content == LONG_ANSWER


def test_a_server_that_still_cuts_the_prompt_is_reported(tmp_path: Path) -> None:
    """An Ollama that ignores `num_ctx` (a model always loaded with 4,096): the server
    reads the prompt's size back from the usage and says the prompt was cut."""
    from backend.config import load_settings
    from backend.llm.backends import OllamaBackend
    from backend.llm.context import ContextFitted
    from backend.llm.turn import TurnLLM

    seen: list[ContextFitted] = []
    with TruncatingOllama(free_port(), MODEL, _reply, ignores_num_ctx=True) as stubborn:
        settings = load_settings(
            OLLAMA_HOST=stubborn.url, OLLAMA_MODEL=MODEL, OLLAMA_NUM_CTX=16384, DATA_DIR=tmp_path
        )
        backend = OllamaBackend(settings, "test")
        llm = replace(TurnLLM.for_backend(backend, MODEL), report=seen.append)
        prompt = "Summarise these figures: " + " ".join(str(n) for n in range(3000))

        async def ask() -> str:
            try:
                return await llm.ask(
                    "final", [SystemMessage("You are terse."), HumanMessage(prompt)]
                )
            finally:
                await backend.aclose()

        assert asyncio.run(ask()) == LONG_ANSWER
    assert stubborn.calls[0].truncated  # it did cut what it was sent
    assert [notice.cut_upstream for notice in seen] == [True]
    assert seen[0].reported_tokens == 4096 and "may have cut the prompt" in seen[0].message
