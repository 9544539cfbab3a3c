"""Server-sent events that stop the producer the moment the client goes away.

Starlette's `StreamingResponse` notices a disconnect only at the next write on
ASGI 2.4 servers; an agent that is thinking or running code writes nothing for a
while, so we listen for `http.disconnect` ourselves and cancel the stream.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse_data(payload: Any, event: str | None = None) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {data}\n\n"


class SSEResponse(StreamingResponse):
    media_type = "text/event-stream"

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
