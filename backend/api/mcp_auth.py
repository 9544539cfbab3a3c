"""The bearer check in front of `/mcp`: no valid token, no MCP session.

A request without a valid personal API key (or login token) gets the REST API's 401,
as JSON with a `WWW-Authenticate: Bearer` challenge, before the SDK sees it. The tools
(mcp_server.py) resolve the user from the same header on every call, so a key revoked
mid-session stops working at once.

A session belongs to the user who opened it: a request naming another user's session
(or one never opened) is answered 404, as for a session that ended, so no user reads or
ends another's stream.

Each user may hold USER_MAX_MCP_SESSIONS sessions open: the SDK's own cap is one for the
whole server, which one user could otherwise fill. A session counts from the response
that names it until the SDK forgets it (closed by the host, or idle for 30 minutes).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.api.errors import error_body
from backend.core.accounts import authenticate
from backend.core.services import Services

_MISSING = (
    "Missing bearer token: send 'Authorization: Bearer <key>' with a personal API key "
    "(Account & API keys in the web UI, or POST /api/keys)."
)
_INVALID = "Invalid or expired token: create a new API key."
_NO_SESSION = "MCP session not found: it ended, or is not yours; start a new one (initialize)."
MCP_SESSION_ID = "mcp-session-id"


def bearer_token(headers: Mapping[str, str] | None) -> str:
    """The request's bearer token, or '' when it has none."""
    value = (headers or {}).get("authorization", "")
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class McpAuth:
    """ASGI middleware: a 401 unless the request's bearer token names an enabled user, and
    a 429 for a user who would open more than their share of MCP sessions."""

    def __init__(
        self, app: ASGIApp, services: Services, manager: StreamableHTTPSessionManager
    ) -> None:
        self.app, self.services, self.manager = app, services, manager
        self.sessions: dict[int, set[str]] = defaultdict(set)  # user id → MCP session ids

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
            session_id = Headers(scope=scope).get(MCP_SESSION_ID)
            if session_id is not None and session_id not in self.sessions.get(user.id, ()):
                body = error_body(scope["path"], 404, _NO_SESSION, code="mcp_session_not_found")
                await JSONResponse(body, status_code=404)(scope, receive, send)
            elif scope["method"] != "POST" or session_id is not None:
                await self.app(scope, receive, send)
            else:
                await self._open(user.id, scope, receive, send)
            return
        message = _MISSING if not token else _INVALID
        if user is not None:
            message = "This account is disabled: ask an admin."
        body = error_body(scope["path"], 401, message, code="invalid_api_key")
        refusal = JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})
        await refusal(scope, receive, send)

    async def _open(self, user_id: int, scope: Scope, receive: Receive, send: Send) -> None:
        """A request that opens a session, if the user has room for one more."""
        live = self.manager._server_instances  # the SDK's open sessions, by id
        mine = self.sessions[user_id]
        mine.intersection_update(live)  # those it ended or timed out are gone
        cap = self.services.settings.USER_MAX_MCP_SESSIONS
        if len(mine) >= cap:
            message = (
                f"You have {len(mine)} MCP sessions open, the most allowed "
                "(USER_MAX_MCP_SESSIONS): close one, or let an idle one end."
            )
            body = error_body(scope["path"], 429, message, code="too_many_mcp_sessions")
            await JSONResponse(body, status_code=429)(scope, receive, send)
            return

        async def named(message: Message) -> None:
            if message["type"] == "http.response.start":
                session_id = Headers(raw=message.get("headers", [])).get(MCP_SESSION_ID)
                if session_id:
                    mine.add(session_id)
            await send(message)

        await self.app(scope, receive, named)
