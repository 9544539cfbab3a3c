"""The REST API's refusals as MCP tool errors: the same message, never a dropped call.

A tool body runs inside `as_tool_errors()`: a known refusal (a per-user limit, a busy
sandbox host, an unreachable model or database, a full disk) becomes a `ToolError` that
says what the REST API would (its `DOMAIN_ERRORS` entry); anything else is left to the
SDK, which logs it and answers an error result.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mcp.server.mcpserver.exceptions import ToolError

from backend.api.errors import api_error
from backend.core.limits import LimitReached
from backend.core.python_coder_service import ExecutorUnavailable
from backend.core.source_access import SourceInvalid, SourceNotFound, SourceReadOnly
from backend.llm import LLMError
from backend.storage import SessionOwnedByAnotherUser, StoreBusy, StoreFull, StoreUnavailable
from backend.storage.s3_objects import S3Error
from backend.storage.sessions import InvalidSession
from backend.tools.sandbox.admission import SandboxRefused
from backend.tools.sandbox.data_channel import QueryRefused

# What a tool passes on to its caller; the rest of the table is about REST requests.
_PASSED_ON = (
    LimitReached,
    SourceNotFound,
    SourceReadOnly,
    SourceInvalid,
    QueryRefused,
    InvalidSession,
    SessionOwnedByAnotherUser,
    SandboxRefused,
    LLMError,
    ExecutorUnavailable,
    S3Error,
    StoreBusy,
    StoreUnavailable,
    StoreFull,
)


@contextmanager
def as_tool_errors() -> Iterator[None]:
    try:
        yield
    except _PASSED_ON as exc:
        raise ToolError(api_error(exc).message) from None
