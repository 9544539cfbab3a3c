"""The bearer check in front of `/mcp`: no valid token, no MCP session.

A request without a valid personal API key (or login token) gets the REST API's 401,
as JSON with a `WWW-Authenticate: Bearer` challenge, before the SDK sees it. The tools
(mcp_server.py) resolve the user from the same header on every call, so a key revoked
mid-session stops working at once.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.api.errors import error_body
from backend.core.accounts import authenticate
from backend.core.services import Services

_MISSING = (
    "Missing bearer token: send 'Authorization: Bearer <key>' with a personal API key "
    "(Account & API keys in the web UI, or POST /api/keys)."
)
_INVALID = "Invalid or expired token: create a new API key."


def bearer_token(headers: Mapping[str, str] | None) -> str:
    """The request's bearer token, or '' when it has none."""
    value = (headers or {}).get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class McpAuth:
    """ASGI middleware: a 401 unless the request's bearer token names an enabled user."""

    def __init__(self, app: ASGIApp, services: Services) -> None:
        self.app, self.services = app, services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = bearer_token(Headers(scope=scope))
        user = None
        if token:
            user = await run_in_threadpool(
                authenticate, self.services.store, self.services.secret_key, token
            )
        if user is not None and not user.disabled:
            await self.app(scope, receive, send)
            return
        message = _MISSING if not token else _INVALID
        if user is not None:
            message = "This account is disabled: ask an admin."
        body = error_body(scope["path"], 401, message, code="invalid_api_key")
        refusal = JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})
        await refusal(scope, receive, send)
