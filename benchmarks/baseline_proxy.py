"""The floor for gateway overhead: a minimal Starlette + httpx pass-through proxy.

It forwards `POST /v1/chat/completions` to the upstream and streams the bytes back
unchanged: no auth, no parsing, no storage. What our server adds beyond what this
adds is the cost of being more than a proxy.

    .venv/bin/python -m benchmarks.baseline_proxy --port 9001 --upstream http://127.0.0.1:9000/v1
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route


def create_app(upstream: str) -> Starlette:
    client = httpx.AsyncClient(
        base_url=upstream, timeout=60, limits=httpx.Limits(max_connections=512)
    )

    async def completions(request: Request) -> StreamingResponse:
        forwarded = client.build_request(
            "POST",
            "/chat/completions",
            content=await request.body(),
            headers={"content-type": "application/json"},
        )
        reply = await client.send(forwarded, stream=True)

        async def body() -> AsyncIterator[bytes]:
            async for chunk in reply.aiter_raw():
                yield chunk

        return StreamingResponse(
            body(),
            status_code=reply.status_code,
            media_type=reply.headers.get("content-type"),
            background=BackgroundTask(reply.aclose),
        )

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True)
    args = parser.parse_args()
    uvicorn.run(create_app(args.upstream), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
