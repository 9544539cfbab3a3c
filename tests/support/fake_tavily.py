"""A minimal Tavily on loopback: `POST /search`, recording every request it gets.

By default it answers in Tavily's response shape with `results`. Set `status`,
`body` (raw bytes sent as-is) or `delay` to play a failing, malformed or slow
service. A slow answer gives up early when its client hangs up.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.support.threaded_server import ThreadedServer


@dataclass
class RecordedRequest:
    headers: dict[str, str]
    json: Any


@dataclass
class Behaviour:
    api_key: str | None = None  # when set, other bearer tokens get Tavily's 401
    results: list[Any] = field(default_factory=list)
    answer: str | None = None
    status: int = 200
    body: bytes | None = None
    delay: float = 0.0


def result(title: str, url: str, content: str, score: float = 0.9) -> dict[str, Any]:
    return {"title": title, "url": url, "content": content, "score": score, "raw_content": None}


def create_app(behaviour: Behaviour, requests: list[RecordedRequest]) -> Starlette:
    async def search(request: Request) -> Response:
        raw = await request.body()
        try:
            sent = await request.json()
        except ValueError:
            sent = raw.decode(errors="replace")
        requests.append(RecordedRequest(dict(request.headers), sent))
        deadline = time.monotonic() + behaviour.delay
        while time.monotonic() < deadline:
            if await request.is_disconnected():
                return Response(status_code=499)
            await asyncio.sleep(0.02)
        expected = f"Bearer {behaviour.api_key}"
        if behaviour.api_key is not None and request.headers.get("authorization") != expected:
            detail = {"error": "Unauthorized: missing or invalid API key."}
            return JSONResponse({"detail": detail}, status_code=401)
        if behaviour.body is not None:
            return Response(behaviour.body, behaviour.status, media_type="application/json")
        if behaviour.status != 200:
            detail = {"error": f"fake Tavily answers {behaviour.status}"}
            return JSONResponse({"detail": detail}, status_code=behaviour.status)
        query = sent.get("query") if isinstance(sent, dict) else None
        limit = sent.get("max_results", 5) if isinstance(sent, dict) else 5
        answer = behaviour.answer if isinstance(sent, dict) and sent.get("include_answer") else None
        return JSONResponse(
            {
                "query": query,
                "follow_up_questions": None,
                "answer": answer,
                "images": [],
                "results": behaviour.results[:limit],
                "response_time": 0.01,
            }
        )

    return Starlette(routes=[Route("/search", search, methods=["POST"])])


class FakeTavily(ThreadedServer):
    def __init__(self, port: int, behaviour: Behaviour | None = None) -> None:
        self.behaviour = behaviour or Behaviour()
        self.requests: list[RecordedRequest] = []
        super().__init__(create_app(self.behaviour, self.requests), port)
