"""A scripted OpenAI-compatible upstream: streams N tokens with fixed pacing.

With `tools` it calls the first one (in streamed pieces); with `logprobs` each
token carries one. Some messages ask for a fault: "fail with 500", "stream garbage",
"stream a list" (JSON that is not an object), "rate limit twice" (429 with
Retry-After, twice, then the answer), "rate limit always", "drop mid-stream" (three
tokens, then the connection is cut) and "be slow" (nothing for 5 s).

Used by the disconnect tests and by `benchmarks/gateway_overhead.py`. It counts
streams that finished and streams whose client went away, at `GET /stats`.
Run standalone with `python -m tests.support.fake_openai --port P`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from tests.support.threaded_server import ThreadedServer

MODEL = "fake-upstream"


def create_app(tokens: int = 20, delay: float = 0.005) -> Starlette:
    stats: dict[str, Any] = {"requests": 0, "completed": 0, "disconnected": 0}

    def chunk(
        delta: dict[str, Any],
        finish: str | None = None,
        *,
        usage: dict[str, int] | None = None,
        logprobs: bool = False,
    ) -> str:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "finish_reason": finish}
        if logprobs:  # one made-up probability per token, with one alternative
            token = delta["content"]
            alternative = {"token": "other", "logprob": -2.5, "bytes": list(b"other")}
            choice["logprobs"] = {"content": [{"token": token, "logprob": -0.25,
                                               "bytes": list(token.encode()),
                                               "top_logprobs": [alternative]}]}  # fmt: skip
        body: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": MODEL,
            "choices": [choice],
        }
        if usage is not None:
            body["choices"], body["usage"] = [], usage
        return f"data: {json.dumps(body)}\n\n"

    async def chat(request: Request) -> Any:
        body = await request.json()
        stats["requests"] += 1
        stats["last_request"] = body
        said = body["messages"][-1].get("content")
        if said == "fail with 500":
            return JSONResponse({"error": {"message": "the GPU caught fire"}}, status_code=500)
        if said == "stream garbage":
            return StreamingResponse(iter(["data: {not json\n\n"]), media_type="text/event-stream")
        if said == "stream a list":
            return StreamingResponse(iter(["data: [1, 2]\n\n"]), media_type="text/event-stream")
        limited = stats.setdefault("rate_limited", 0)
        if said == "rate limit always" or (said == "rate limit twice" and limited < 2):
            stats["rate_limited"] = limited + 1
            error = {"error": {"message": "slow down", "type": "rate_limit_error"}}
            return JSONResponse(error, status_code=429, headers={"Retry-After": "0.2"})
        if said == "be slow":
            await asyncio.sleep(5)
        if not body.get("stream"):
            await asyncio.sleep(delay * tokens)
            stats["completed"] += 1
            content = "".join(f"tok{i} " for i in range(tokens))
            return JSONResponse(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": MODEL,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": 5,
                        "completion_tokens": tokens,
                        "total_tokens": tokens + 5,
                    },
                }
            )

        async def stream() -> AsyncIterator[str]:
            try:
                yield chunk({"role": "assistant", "content": ""})
                if body.get("tools"):  # native tool calling: call the first tool, in pieces
                    name = body["tools"][0]["function"]["name"]
                    opening = {"index": 0, "id": "call_upstream1", "type": "function",
                               "function": {"name": name, "arguments": '{"city": '}}  # fmt: skip
                    yield chunk({"tool_calls": [opening]})
                    rest = {"index": 0, "function": {"arguments": '"Paris"}'}}
                    yield chunk({"tool_calls": [rest]})
                    yield chunk({}, "tool_calls")
                else:
                    for i in range(tokens):
                        if said == "drop mid-stream" and i == 3:
                            raise ConnectionAbortedError("the upstream went away mid-answer")
                        await asyncio.sleep(delay)
                        yield chunk({"content": f"tok{i} "}, logprobs=bool(body.get("logprobs")))
                    yield chunk({}, "stop")
                if (body.get("stream_options") or {}).get("include_usage"):
                    usage = {
                        "prompt_tokens": 5,
                        "completion_tokens": tokens,
                        "total_tokens": tokens + 5,
                    }
                    yield chunk({}, usage=usage)
                yield "data: [DONE]\n\n"
                stats["completed"] += 1
            except asyncio.CancelledError:
                stats["disconnected"] += 1
                raise

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

    async def read_stats(request: Request) -> JSONResponse:
        return JSONResponse(stats)

    async def embeddings(request: Request) -> JSONResponse:
        body = await request.json()
        stats["last_request"] = body
        data = [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5]}]
        usage = {"prompt_tokens": 1, "total_tokens": 1}
        return JSONResponse({"object": "list", "data": data, "model": MODEL, "usage": usage})

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models),
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/stats", read_stats),
        ]
    )


class FakeUpstreamThread(ThreadedServer):
    """The fake upstream, served from a background thread of this process."""

    def __init__(self, port: int, tokens: int = 20, delay: float = 0.005) -> None:
        super().__init__(create_app(tokens, delay), port)
        self.url = f"{self.base_url}/v1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--delay-ms", type=float, default=5.0)
    args = parser.parse_args()
    uvicorn.run(
        create_app(args.tokens, args.delay_ms / 1000),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
    )


if __name__ == "__main__":
    main()
