"""What went wrong with an MCP server, in our words: never in the words it sent.

An admin may point a server's URL anywhere, at an internal service too; the SDK's
errors quote what came back (a JSON parse error shows the start and end of the body,
a JSON-RPC error at an HTTP error status is its `message`, h11 quotes a bad status
line). So a failure is told by its kind alone: the HTTP status, "not an MCP server",
a timeout, a refused connection. A tool's refusal by a server that did speak MCP is
another thing: `refusal` passes that on, as the tool's result would have been.
"""

from __future__ import annotations

import httpx2
import mcp_types as types
from mcp.shared.exceptions import MCPError

_NOT_MCP = "its answer is not MCP: is the URL an MCP server's Streamable HTTP endpoint?"
_REFUSAL_CHARS = 500  # a tool's refusal, as an MCP server worded it, at most this long


def innermost(exc: BaseException) -> BaseException:
    """The first error inside task groups' exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def described(exc: BaseException, http_status: int | None = None) -> str:
    """`exc` in words that hold nothing the server sent; `http_status`: the last error
    status an HTTP server answered, if any."""
    exc = innermost(exc)
    if isinstance(exc, httpx2.HTTPStatusError):
        http_status = exc.response.status_code
    if http_status is not None and isinstance(exc, MCPError | httpx2.HTTPStatusError):
        return f"it answered HTTP {http_status}"
    if isinstance(exc, MCPError):
        code = exc.error.code
        if code in (types.PARSE_ERROR, types.INVALID_REQUEST, types.METHOD_NOT_FOUND):
            return _NOT_MCP
        if code == types.CONNECTION_CLOSED:
            return "it closed the connection"
        if code == types.REQUEST_TIMEOUT:
            return "it did not answer in time"
        return f"it answered MCP error {code}"
    if isinstance(exc, httpx2.TimeoutException | TimeoutError):
        return "it did not answer in time"
    if isinstance(exc, httpx2.ConnectError | OSError):
        # Made here, by the socket or the process spawn, not by the server.
        text = str(exc).strip()
        return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if isinstance(exc, httpx2.ProtocolError | httpx2.DecodingError | httpx2.StreamError):
        return "its answer is not valid HTTP"
    return type(exc).__name__


def refusal(exc: MCPError, http_status: int | None) -> str:
    """A tool call's MCP error: the server's own words when it answered in MCP (as a
    tool's result would be), else `described`."""
    if http_status is not None or exc.error.code in (
        types.PARSE_ERROR,
        types.INVALID_REQUEST,
        types.CONNECTION_CLOSED,
    ):
        return described(exc, http_status)
    message = exc.error.message.strip()
    if len(message) > _REFUSAL_CHARS:
        message = message[:_REFUSAL_CHARS] + "…"
    return message
