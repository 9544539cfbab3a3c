"""How a stream ends: its closing frames and the end of the response in one message,
then the producer closed (the turn stored) before the server does anything else."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from backend.api.encoders.chat import typed_sse
from backend.api.encoders.completions import CompletionChunks
from backend.api.sse import Last, SSEResponse
from backend.api.streaming import start_stream
from backend.core.events import TurnEvent
from backend.llm.stream import AnswerDelta


def test_the_last_frames_end_the_response_and_then_the_producer_is_closed() -> None:
    log: list[Any] = []

    async def frames() -> AsyncIterator[str]:
        try:
            yield "data: 1\n\n"
            yield Last("data: 2\n\ndata: [DONE]\n\n")
            log.append("resumed")  # never: nothing may follow the last frames
        finally:
            log.append("closed")

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # the client stays; the stream ends by itself
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        log.append((message["type"], message.get("body"), message.get("more_body")))

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}}
    asyncio.run(SSEResponse(frames())(scope, receive, send))
    assert log == [
        ("http.response.start", None, None),
        ("http.response.body", b"data: 1\n\n", True),
        ("http.response.body", b"data: 2\n\ndata: [DONE]\n\n", False),
        "closed",
    ]


def test_a_turn_whose_client_went_before_its_response_began_is_closed_with_it() -> None:
    """The client left while the model worked on its first token: the response's body
    never begins. Before, nothing closed the turn then; the garbage collector did, later
    (a user's places held till then), closing its generators all at once, which raced:
    "aclose(): asynchronous generator is already running" (noisy_neighbour's log)."""
    log: list[str] = []

    async def turn() -> AsyncGenerator[TurnEvent, None]:
        try:
            yield AnswerDelta(text="first")
            yield AnswerDelta(text="second")
        finally:
            log.append("turn closed")

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}  # gone already

    async def send(message: dict[str, Any]) -> None:
        log.append(message["type"])

    async def respond() -> None:
        events = await start_stream(turn())
        scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}}
        await SSEResponse(typed_sse(events, "s"), source=events)(scope, receive, send)
        assert log == ["turn closed"]  # closed by the response, before it returned

    collecting = gc.isenabled()
    gc.disable()  # only the response may close it
    try:
        asyncio.run(respond())
    finally:
        if collecting:
            gc.enable()


def test_a_content_chunk_is_the_same_json_as_a_built_one() -> None:
    chunks = CompletionChunks("model-a")
    for text in ['he said "hi"\n', "naïve — 東京", "\\", ""]:
        assert json.loads(chunks.content(text)) == json.loads(chunks.chunk({"content": text}))
    logprobs = [{"token": "x", "logprob": -0.5, "bytes": [120], "top_logprobs": []}]
    parsed = json.loads(chunks.content("x", logprobs))
    assert parsed["choices"][0]["logprobs"] == {"content": logprobs}
    assert parsed["id"] == chunks.id and parsed["id"].startswith("chatcmpl-")
