"""An Ollama on loopback whose models differ the way real ones do (issue 41's stand-ins).

Each model has a context window (`/api/show`), and either calls a tool it is offered or
answers in prose, and either fills a JSON schema with the right values or does not. The
model probe's two questions (`backend/llm/model_probe.py`) get right or wrong answers
accordingly; any other call gets a short plain reply. The `/api/chat` bodies are kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from tests.support.threaded_server import ThreadedServer


@dataclass(frozen=True)
class StandIn:
    window: int  # tokens it was trained on
    calls_tools: bool = True
    fills_json: bool = True


def create_app(models: dict[str, StandIn], seen: list[dict[str, Any]]) -> Starlette:
    async def tags(request: Request) -> JSONResponse:
        return JSONResponse({"models": [{"name": name, "model": name} for name in models]})

    async def show(request: Request) -> JSONResponse:
        name = (await request.json())["model"]
        if name not in models:
            return JSONResponse({"error": f"model '{name}' not found"}, status_code=404)
        return JSONResponse({"model_info": {"llama.context_length": models[name].window}})

    async def chat(request: Request) -> StreamingResponse | JSONResponse:
        body = await request.json()
        seen.append(body)
        model = models.get(body["model"])
        if model is None:
            return JSONResponse({"error": f"model '{body['model']}' not found"}, status_code=404)
        message = _answer(model, body)
        base = {"model": body["model"], "created_at": "2026-01-01T00:00:00Z"}
        done = {**base, "message": {"role": "assistant", "content": ""}, "done": True,
                "done_reason": "stop", "prompt_eval_count": 12, "eval_count": 5}  # fmt: skip
        if body.get("stream") is False:
            return JSONResponse({**done, "message": message})

        def lines() -> Iterator[str]:
            yield json.dumps({**base, "message": message, "done": False}) + "\n"
            yield json.dumps(done) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    return Starlette(
        routes=[
            Route("/api/tags", tags),
            Route("/api/show", show, methods=["POST"]),
            Route("/api/chat", chat, methods=["POST"]),
        ]
    )


def _answer(model: StandIn, body: dict[str, Any]) -> dict[str, Any]:
    tools = body.get("tools") or []
    if tools and model.calls_tools:
        name = tools[0]["function"]["name"]
        call = {"function": {"name": name, "arguments": {"total": 42}}}
        return {"role": "assistant", "content": "", "tool_calls": [call]}
    if tools:
        return {"role": "assistant", "content": "The total is 42."}
    if isinstance(body.get("format"), dict):
        right = '{"city": "Paris", "letters": 5}' if model.fills_json else '{"city": "France"}'
        return {"role": "assistant", "content": right}
    return {"role": "assistant", "content": "Hello from a stand-in."}


class StandInOllama(ThreadedServer):
    def __init__(self, port: int, models: dict[str, StandIn]) -> None:
        self.requests: list[dict[str, Any]] = []  # the /api/chat bodies, in order
        super().__init__(create_app(models, self.requests), port)
        self.url = self.base_url
