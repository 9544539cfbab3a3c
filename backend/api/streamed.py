"""A streamed response whose body is closed when the response ends, however it ends.

Starlette's `StreamingResponse` stops iterating its body when the client goes, but leaves
the body open: a generator suspended at its `yield` keeps what it holds (a governor's
place, a DuckDB cursor and the engine memory its query pins, an open file) until the
garbage collector finds it, which, in a cycle, may be minutes later or never (a table
stayed open over 10 s after two clients left its download). Here the body is closed when
the response ends: sent in full, failed, or cut off, in a scope that cancellation cannot
interrupt. A synchronous iterator, which Starlette reads in a thread, is closed in one.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Mapping

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class ClosingStreamingResponse(StreamingResponse):
    def __init__(
        self,
        content: AsyncIterable[str | bytes] | Iterable[str | bytes],
        *,
        status_code: int = 200,
        headers: Mapping[str, str] | None = None,
        media_type: str | None = None,
    ) -> None:
        super().__init__(content, status_code, headers, media_type)
        self._content = content

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.respond(scope, receive, send)
        finally:
            with anyio.CancelScope(shield=True):
                await self.close_body()

    async def respond(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Send the response (Starlette's way unless a subclass says otherwise)."""
        await super().__call__(scope, receive, send)

    async def close_body(self) -> None:
        """Close the body: its async generator, or the iterator Starlette read in a thread
        (whose `next` has ended by now: Starlette waits for it even when cancelled)."""
        aclose = getattr(self.body_iterator, "aclose", None)
        if aclose is not None:
            await aclose()
        close = getattr(self._content, "close", None)
        if close is not None and not isinstance(self._content, AsyncIterable):
            await run_in_threadpool(close)
