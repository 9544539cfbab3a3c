"""Server-sent events that stop the producer the moment the client goes away.

Starlette's `StreamingResponse` notices a disconnect only at the next write on
ASGI 2.4 servers; an agent that is thinking or running code writes nothing for a
while, so we listen for `http.disconnect` ourselves and cancel the stream.

A producer marks its closing frames `Last`: they go out with the end of the
response in one write, and the producer is closed at once, so whatever it does
on closing (storing the turn) no longer delays the client.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class Last(str):
    """A stream's closing frames: nothing follows them."""


def sse_data(payload: Any, event: str | None = None) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {data}\n\n"


class SSEResponse(StreamingResponse):
    media_type = "text/event-stream"

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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as group:

            async def stream() -> None:
                with contextlib.suppress(OSError):  # the client went away mid-write
                    await self.stream_response(send)
                group.cancel_scope.cancel()

            group.start_soon(stream)
            await self.listen_for_disconnect(receive)
            group.cancel_scope.cancel()
        aclose = getattr(self.body_iterator, "aclose", None)
        if aclose is not None:
            await aclose()
