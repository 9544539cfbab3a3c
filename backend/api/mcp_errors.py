"""The REST API's refusals as MCP tool errors: the same message, never a dropped call.

A tool body runs inside `as_tool_errors()`: a known refusal (a per-user limit, a busy
sandbox host, an unreachable model or database, a full disk) becomes a `ToolError` that
says what the REST API would; anything else is left to the SDK, which logs it and answers
an error result.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mcp.server.mcpserver.exceptions import ToolError

from backend.api.errors import STORE_BUSY, STORE_FULL, STORE_UNAVAILABLE
from backend.core.limits import LimitReached
from backend.core.python_coder_service import ExecutorUnavailable
from backend.llm import LLMError
from backend.storage import StoreBusy, StoreFull, StoreUnavailable
from backend.storage.s3_objects import S3Error
from backend.tools.sandbox.admission import SandboxRefused

_STORE = {StoreBusy: STORE_BUSY, StoreUnavailable: STORE_UNAVAILABLE, StoreFull: STORE_FULL}


@contextmanager
def as_tool_errors() -> Iterator[None]:
    try:
        yield
    except (LimitReached, SandboxRefused, LLMError) as exc:
        raise ToolError(exc.message) from None
    except (ExecutorUnavailable, S3Error) as exc:
        raise ToolError(str(exc)) from None
    except (StoreBusy, StoreUnavailable, StoreFull) as exc:
        raise ToolError(_STORE[type(exc)]) from None
