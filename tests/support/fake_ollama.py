"""A minimal Ollama on loopback: `/api/tags` and a streamed `/api/chat`."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route


def create_app(models: list[str], reply: str) -> Starlette:
    async def tags(request: Request) -> JSONResponse:
        return JSONResponse({"models": [{"name": name, "model": name} for name in models]})

    async def chat(request: Request) -> StreamingResponse | JSONResponse:
        body = await request.json()
        if body["model"] not in models:
            return JSONResponse({"error": f"model '{body['model']}' not found"}, status_code=404)

        def lines() -> Iterator[str]:
            base = {"model": body["model"], "created_at": "2026-01-01T00:00:00Z"}
            for word in reply.split(" "):
                message = {"role": "assistant", "content": word + " "}
                yield json.dumps({**base, "message": message, "done": False}) + "\n"
            final = {"role": "assistant", "content": ""}
            counts = {"prompt_eval_count": 7, "eval_count": len(reply.split(" "))}
            done = {**base, "message": final, "done": True, "done_reason": "stop", **counts}
            yield json.dumps(done) + "\n"

        return StreamingResponse(lines(), media_type="application/x-ndjson")

    return Starlette(routes=[Route("/api/tags", tags), Route("/api/chat", chat, methods=["POST"])])


class FakeOllama:
    def __init__(self, port: int, models: list[str], reply: str = "Hello from Ollama.") -> None:
        config = uvicorn.Config(
            create_app(models, reply), host="127.0.0.1", port=port, log_level="warning"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{port}"

    def __enter__(self) -> FakeOllama:
        self.thread.start()
        while not self.server.started:
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
