"""A minimal Ollama on loopback: `/api/tags` and a streamed `/api/chat` (bodies kept)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from tests.support.threaded_server import ThreadedServer


def create_app(models: list[str], reply: str, seen: list[dict[str, Any]]) -> Starlette:
    async def tags(request: Request) -> JSONResponse:
        return JSONResponse({"models": [{"name": name, "model": name} for name in models]})

    async def chat(request: Request) -> StreamingResponse | JSONResponse:
        body = await request.json()
        seen.append(body)
        if body["model"] not in models:
            return JSONResponse({"error": f"model '{body['model']}' not found"}, status_code=404)

        def lines() -> Iterator[str]:
            base = {"model": body["model"], "created_at": "2026-01-01T00:00:00Z"}
            if body.get("tools"):  # native tool calling: call the first tool
                name = body["tools"][0]["function"]["name"]
                call = {"function": {"name": name, "arguments": {"city": "Paris"}}}
                message = {"role": "assistant", "content": "", "tool_calls": [call]}
                yield json.dumps({**base, "message": message, "done": False}) + "\n"
            for word in reply.split(" "):
                message = {"role": "assistant", "content": word + " "}
                chunk = {**base, "message": message, "done": False}
                if body.get("logprobs"):  # Ollama's shape is OpenAI's
                    chunk["logprobs"] = [{"token": word + " ", "logprob": -0.5, "top_logprobs": []}]
                yield json.dumps(chunk) + "\n"
            final = {"role": "assistant", "content": ""}
            counts = {"prompt_eval_count": 7, "eval_count": len(reply.split(" "))}
            done = {**base, "message": final, "done": True, "done_reason": "stop", **counts}
            yield json.dumps(done) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    async def embed(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        if body["model"] not in models:
            return JSONResponse({"error": f"model '{body['model']}' not found"}, status_code=404)
        texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
        # A vector per text that depends on the text: its length, and a constant.
        vectors = [[float(len(text)), 0.5, -1.0] for text in texts]
        return JSONResponse({"model": body["model"], "embeddings": vectors,
                             "prompt_eval_count": sum(len(t.split()) for t in texts)})  # fmt: skip

    return Starlette(
        routes=[
            Route("/api/tags", tags),
            Route("/api/chat", chat, methods=["POST"]),
            Route("/api/embed", embed, methods=["POST"]),
        ]
    )


class FakeOllama(ThreadedServer):
    def __init__(self, port: int, models: list[str], reply: str = "Hello from Ollama.") -> None:
        self.requests: list[dict[str, Any]] = []  # the /api/chat bodies, in order
        super().__init__(create_app(models, reply, self.requests), port)
        self.url = self.base_url
