"""Each agent call asks the model's server to reuse its cached prefix, where it can.

A llama.cpp server reads `cache_prompt`; an upstream that refuses unknown fields,
as OpenAI's own API does, is asked once, then no more, and no call fails for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from backend.config import load_settings
from backend.llm.backends import OllamaBackend, OpenAIBackend
from backend.llm.turn import TurnLLM
from tests.support.live_server import free_port
from tests.support.threaded_server import ThreadedServer


class Verdict(BaseModel):
    ok: bool


def _upstream(bodies: list[dict[str, Any]], strict: bool) -> Starlette:
    """An OpenAI-compatible upstream; `strict`: it refuses unknown fields as OpenAI does."""

    async def chat(request: Request) -> Response:
        body = await request.json()
        bodies.append(body)
        if strict and "cache_prompt" in body:
            error = {"message": "Unrecognized request argument supplied: cache_prompt",
                     "type": "invalid_request_error", "param": None, "code": None}  # fmt: skip
            return JSONResponse({"error": error}, status_code=400)
        content = '{"ok": true}' if body.get("response_format") else "fine"
        if body.get("stream"):
            chunks = [
                {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": part}, "finish_reason": None}]}
                for part in (content[:2], content[2:])
            ]  # fmt: skip
            lines = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
            return Response("".join(lines), media_type="text/event-stream")
        return JSONResponse(
            {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
             "choices": [{"index": 0, "finish_reason": "stop",
                          "message": {"role": "assistant", "content": content}}],
             "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
        )  # fmt: skip

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


@pytest.fixture(params=[False, True], ids=["llama.cpp", "strict"])
def upstream(request: pytest.FixtureRequest) -> Iterator[tuple[str, list[dict[str, Any]], bool]]:
    bodies: list[dict[str, Any]] = []
    port = free_port()
    with ThreadedServer(_upstream(bodies, request.param), port) as server:
        yield server.base_url, bodies, request.param


async def test_every_call_asks_for_the_cached_prefix_until_the_upstream_refuses_it(
    upstream: tuple[str, list[dict[str, Any]], bool], tmp_path: Path
) -> None:
    url, bodies, strict = upstream
    settings = load_settings(
        DATA_DIR=tmp_path, LLM_BACKEND="openai", OPENAI_BASE_URL=f"{url}/v1", OPENAI_MODEL="m"
    )
    backend = OpenAIBackend(settings, "test")
    llm = TurnLLM.for_backend(backend, "m")
    try:
        assert await llm.text("generate", "", "[stage: generate] hi") == "fine"
        assert "".join([t async for t in llm.stream("answer", llm.messages("", "hi"))]) == "fine"
        verdict = await llm.json("review", "", "[stage: review] ok?", Verdict)
    finally:
        await backend.aclose()
    assert verdict.ok and llm.usage.calls == 3  # a refusal and its retry are one call

    asked = ["cache_prompt" in body for body in bodies]
    # A strict upstream refused the first call's hint; it was sent again without it, and the
    # hint was never sent after that.
    assert asked == ([True, False, False, False] if strict else [True, True, True])
    assert bodies[-1]["response_format"]["type"] == "json_schema"  # the verdict is constrained


def test_ollama_keeps_the_model_and_its_cache_loaded_for_the_setting(tmp_path: Path) -> None:
    settings = load_settings(DATA_DIR=tmp_path, OLLAMA_KEEP_ALIVE="2h")
    assert OllamaBackend(settings, "test").cache_kwargs() == {"keep_alive": "2h"}
    quiet = load_settings(DATA_DIR=tmp_path, OLLAMA_KEEP_ALIVE="")
    assert OllamaBackend(quiet, "test").cache_kwargs() == {}
