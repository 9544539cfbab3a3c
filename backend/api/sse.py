"""Server-sent events that stop the producer the moment the client goes away.

Starlette's `StreamingResponse` notices a disconnect only at the next write on
ASGI 2.4 servers; an agent that is thinking or running code writes nothing for a
while, so we listen for `http.disconnect` ourselves and cancel the stream.

A producer marks its closing frames `Last`: they go out with the end of the
response in one write, and the producer is closed at once, so whatever it does
on closing (storing the turn) no longer delays the client.

A stream that has sent nothing for `keepalive` seconds (a model loading, code
running) gets an SSE comment, `: keep-alive`, which every client ignores, so
that proxies and load balancers do not cut it as idle.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

import anyio
from starlette.types import Message, Receive, Scope, Send

from backend.api.streamed import ClosingStreamingResponse

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
KEEPALIVE_SECONDS = 15.0
KEEPALIVE = b": keep-alive\n\n"


# One event of a stream, as FastAPI documents its own (`itemSchema`, from Open API 3.2).
_EVENT_SCHEMA = {
    "type": "object",
    "properties": {
        "data": {"type": "string"},
        "event": {"type": "string"},
        "id": {"type": "string"},
    },
}


def sse_responses(description: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for a 200 that is, or may be, a stream of server-sent events."""
    stream = {"text/event-stream": {"itemSchema": _EVENT_SCHEMA}}
    return {200: {"description": description, "content": stream}}


class Last(str):
    """A stream's closing frames: nothing follows them."""


def sse_data(payload: Any, event: str | None = None) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {data}\n\n"


class SSEResponse(ClosingStreamingResponse):
    """`content` as server-sent events; `source`, what `content` encodes, is closed when
    the response ends too, even if `content` never began (its client went first)."""

    media_type = "text/event-stream"

    def __init__(
        self,
        content: AsyncIterator[str],
        *,
        headers: Mapping[str, str] | None = None,
        source: AsyncGenerator[Any, None] | None = None,
    ) -> None:
        super().__init__(content, headers=headers)
        self.source = source

    async def stream_response(self, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        async for chunk in self.body_iterator:
            body = chunk.encode() if isinstance(chunk, str) else chunk
            if isinstance(chunk, Last):
                await send({"type": "http.response.body", "body": body, "more_body": False})
                # Closed before this task yields to the loop: a turn the producer stores
                # on closing is stored before the server reads the client's next request.
                await self.body_iterator.aclose()  # type: ignore[attr-defined]
                return
            await send({"type": "http.response.body", "body": body, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def respond(self, scope: Scope, receive: Receive, send: Send) -> None:
        sender = _KeptAlive(send)
        keepalive = _keepalive_seconds(scope)
        async with anyio.create_task_group() as group:

            async def stream() -> None:
                with contextlib.suppress(OSError):  # the client went away mid-write
                    await self.stream_response(sender.send)
                group.cancel_scope.cancel()

            group.start_soon(stream)
            group.start_soon(sender.ping, keepalive)
            await self.listen_for_disconnect(receive)
            group.cancel_scope.cancel()

    async def close_body(self) -> None:
        await super().close_body()
        if self.source is not None:  # a body never begun has not closed it
            await self.source.aclose()


def _keepalive_seconds(scope: Scope) -> float:
    """STREAM_KEEPALIVE_SECONDS of the app serving `scope` (15 s outside one)."""
    services = getattr(getattr(scope.get("app"), "state", None), "services", None)
    settings = getattr(services, "settings", None)
    return float(getattr(settings, "STREAM_KEEPALIVE_SECONDS", KEEPALIVE_SECONDS))


class _KeptAlive:
    """`send`, plus a comment whenever the body has been quiet for a while."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._lock = anyio.Lock()
        self._started = self._ended = False
        self._last = anyio.current_time()

    async def send(self, message: Message) -> None:
        async with self._lock:
            await self._send(message)
            self._last = anyio.current_time()
            self._started = True
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self._ended = True

    async def ping(self, every: float) -> None:
        while True:
            await anyio.sleep(max(0.0, self._last + every - anyio.current_time()))
            async with self._lock:
                if self._ended:
                    return
                if self._started and anyio.current_time() - self._last >= every:
                    try:
                        await self._send(
                            {"type": "http.response.body", "body": KEEPALIVE, "more_body": True}
                        )
                    except OSError:  # the client went away: the stream ends on its own
                        return
                    self._last = anyio.current_time()
