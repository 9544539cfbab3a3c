"""Refuse request bodies over the configured size with 413, before they are buffered.

Routes that stream a body to disk under their own cap (`streamed`: method and path
pattern) are let through: their limit is theirs to enforce. Form uploads (`overrides`:
path patterns) may be as large as an uploaded file.
"""

from __future__ import annotations

import json
import re

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.api.errors import error_body


class _BodyTooLarge(Exception):
    pass


class BodySizeLimitMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        max_bytes: int,
        overrides: tuple[tuple[re.Pattern[str], int], ...] = (),
        streamed: tuple[tuple[str, re.Pattern[str]], ...] = (),
    ):
        self.app = app
        self.max_bytes = max_bytes
        self.overrides = overrides
        self.streamed = streamed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or any(
            scope["method"] == method and pattern.fullmatch(scope["path"])
            for method, pattern in self.streamed
        ):
            await self.app(scope, receive, send)
            return
        limit = next(
            (cap for pattern, cap in self.overrides if pattern.fullmatch(scope["path"])),
            self.max_bytes,
        )
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit():
            if int(declared) > limit:
                await self._refuse(scope, send, limit)
            else:
                # The server reads no more than the declared length: nothing to guard, and
                # a streamed answer's every chunk skips a wrapper.
                await self.app(scope, receive, send)
            return

        received = 0
        too_large = refused = False

        async def limited_receive() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    too_large = True
                    raise _BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            # The app may turn our exception into its own error response (FastAPI
            # answers 400 for a body it failed to read); answer 413 in its place.
            nonlocal refused
            if not too_large:
                await send(message)
            elif not refused:
                refused = True
                await self._refuse(scope, send, limit)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except _BodyTooLarge:
            if not refused:
                await self._refuse(scope, send, limit)

    async def _refuse(self, scope: Scope, send: Send, limit: int) -> None:
        setting = "MAX_REQUEST_SIZE_MB" if limit == self.max_bytes else "PYTHON_CODE_MAX_FILE_SIZE"
        message = f"Request body is larger than {limit / (1024 * 1024):g} MB ({setting})."
        body = json.dumps(error_body(scope["path"], 413, message, "request_too_large")).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
