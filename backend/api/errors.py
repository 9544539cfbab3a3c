"""Every error leaves the server as a clear 4xx/5xx body, never a stack trace.

`/v1/*` routes answer in OpenAI's shape, `{"error": {message, type, param, code}}`,
so the official SDK raises its own exception types; other routes answer
`{"detail": message}` as FastAPI does.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from backend.api.disconnect import ClientGone
from backend.core.branches import MessageNotFound, NotARegeneration
from backend.core.limits import LimitReached
from backend.core.python_coder_service import ExecutorUnavailable, UnknownSession
from backend.files import UnsupportedFileType
from backend.files.catalog import FileNotInWorkspace
from backend.llm import LLMError
from backend.models.errors import ErrorBody, OpenAIErrorBody
from backend.observability.tracing import current_trace_id
from backend.storage import SessionOwnedByAnotherUser, StoreBusy, StoreFull, StoreUnavailable
from backend.storage.s3_objects import S3Error
from backend.storage.sessions import InvalidSession
from backend.storage.workspaces import NotARegularFile, UnsafePath
from backend.tools.sandbox.admission import SandboxRefused

logger = logging.getLogger(__name__)

_OPENAI_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    429: "rate_limit_error",
}


# OpenAPI `responses` for a router: every 4xx it answers has the body `error_body` writes
# (FastAPI's own 422 entry, a list of validation errors, would be wrong for ours).
CLIENT_ERRORS: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": ErrorBody, "description": "The request was refused: `detail` says why."}
}
OPENAI_CLIENT_ERRORS: dict[int | str, dict[str, Any]] = {
    "4XX": {"model": OpenAIErrorBody, "description": "The request was refused, in OpenAI's shape."}
}


# The store's refusals, said the same way by the REST API and the MCP tools (mcp_errors.py).
STORE_BUSY = "The database is busy (another process holds it): try again shortly."
STORE_UNAVAILABLE = "The database is not reachable: try again shortly."
STORE_FULL = "The server's disk is full: nothing was saved. Free some space and try again."


class ApiError(Exception):
    """An error with a fixed, human message, raised by routes and dependencies."""

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers


def error_body(
    path: str, status_code: int, message: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    trace_id = current_trace_id()  # with tracing on: what a report should quote
    if path.startswith("/v1/"):
        kind = _OPENAI_TYPES.get(status_code)
        if kind is None:
            kind = "invalid_request_error" if status_code < 500 else "server_error"
        error = {"message": message, "type": kind, "param": param, "code": code}
        if trace_id:
            error["trace_id"] = trace_id
        return {"error": error}
    body: dict[str, Any] = {"detail": message}
    if code:
        body["code"] = code
    if trace_id:
        body["trace_id"] = trace_id
    return body


def error_response(
    request: Request,
    status_code: int,
    message: str,
    *,
    code: str | None = None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = error_body(request.url.path, status_code, message, code, param)
    return JSONResponse(body, status_code=status_code, headers=headers)


# Validation errors the request models word as OpenAI does (models/openai.py): their message,
# code and param (`tools[0].type`) are OpenAI's, so a client reads the 400 OpenAI would give.
_OPENAI_WORDED = {"invalid_value", "unsupported_value"}


def _describe_validation(exc: RequestValidationError) -> tuple[int, str, str | None, str]:
    """The status, message, param and code of a refused body."""
    errors = exc.errors()
    if any(err.get("type") == "json_invalid" for err in errors):
        return 400, "The request body is not valid JSON.", None, "invalid_request"
    first = errors[0]
    if first.get("type") in _OPENAI_WORDED:
        return 400, first["msg"], _openai_param(first.get("loc", ())), first["type"]
    location = [str(part) for part in first.get("loc", ()) if part != "body"]
    param = ".".join(location) or None
    details = "; ".join(
        f"{'.'.join(str(p) for p in err.get('loc', ()) if p != 'body') or 'body'}: {err['msg']}"
        for err in errors[:5]
    )
    return 422, f"Invalid request: {details}", param, "invalid_request"


def _openai_param(location: tuple[int | str, ...]) -> str:
    """A body location as OpenAI names the parameter: (body, tools, 0, type) is tools[0].type."""
    param = ""
    for part in location:
        if isinstance(part, int):
            param += f"[{part}]"
        elif part != "body":
            param += f".{part}" if param else part
    return param


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(
            request,
            exc.status_code,
            exc.message,
            code=exc.code,
            param=exc.param,
            headers=exc.headers,
        )

    @app.exception_handler(LLMError)
    async def _llm_error(request: Request, exc: LLMError) -> JSONResponse:
        param = {"model_not_found": "model", "context_length_exceeded": "messages"}.get(exc.code)
        return error_response(request, exc.status_code, exc.message, code=exc.code, param=param)

    @app.exception_handler(S3Error)
    async def _s3_error(request: Request, exc: S3Error) -> JSONResponse:
        return error_response(request, exc.status, str(exc), code=exc.code)

    @app.exception_handler(StoreBusy)
    async def _store_busy(request: Request, exc: StoreBusy) -> JSONResponse:
        logger.warning("The database stayed locked: %s", exc)
        return error_response(
            request,
            503,
            STORE_BUSY,
            code="store_busy",
            headers={"Retry-After": "5"},
        )

    @app.exception_handler(StoreUnavailable)
    async def _store_unavailable(request: Request, exc: StoreUnavailable) -> JSONResponse:
        logger.error("The database is not reachable: %s", exc)
        return error_response(
            request,
            503,
            STORE_UNAVAILABLE,
            code="store_unavailable",
            headers={"Retry-After": "5"},
        )

    @app.exception_handler(StoreFull)
    async def _store_full(request: Request, exc: StoreFull) -> JSONResponse:
        logger.error("The database's disk is full: %s", exc)
        return error_response(
            request,
            507,
            STORE_FULL,
            code="insufficient_storage",
        )

    @app.exception_handler(LimitReached)
    async def _limit_reached(request: Request, exc: LimitReached) -> JSONResponse:
        headers = None if exc.retry_after is None else {"Retry-After": f"{exc.retry_after:.0f}"}
        return error_response(request, exc.status_code, exc.message, code=exc.code, headers=headers)

    @app.exception_handler(SandboxRefused)
    async def _sandbox_refused(request: Request, exc: SandboxRefused) -> JSONResponse:
        headers = {"Retry-After": f"{exc.retry_after:.0f}"}
        return error_response(request, 429, exc.message, code="too_many_sandboxes", headers=headers)

    @app.exception_handler(ExecutorUnavailable)
    async def _executor_unavailable(request: Request, exc: ExecutorUnavailable) -> JSONResponse:
        return error_response(request, 503, str(exc), code="executor_unavailable")

    @app.exception_handler(UnknownSession)
    async def _unknown_session(request: Request, exc: UnknownSession) -> JSONResponse:
        message = f"Session '{exc.session_id}' not found: upload a file to it or chat in it first."
        return error_response(request, 404, message, code="session_not_found")

    # A file named in a request; routes that answer one differently catch it themselves.
    @app.exception_handler(FileNotInWorkspace)
    async def _file_not_found(request: Request, exc: FileNotInWorkspace) -> JSONResponse:
        message = f"File not found in the session: {exc}"
        return error_response(request, 404, message, code="file_not_found")

    @app.exception_handler(UnsupportedFileType)
    async def _unsupported_file(request: Request, exc: UnsupportedFileType) -> JSONResponse:
        return error_response(request, 415, str(exc), code="unsupported_file_type")

    @app.exception_handler(UnsafePath)
    @app.exception_handler(NotARegularFile)
    async def _bad_path(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request, 400, f"Invalid file path: {exc}", code="bad_path")

    @app.exception_handler(ClientGone)
    async def _client_gone(request: Request, exc: ClientGone) -> Response:
        return Response(status_code=499)  # nobody is listening any more

    @app.exception_handler(MessageNotFound)
    async def _no_message(request: Request, exc: Exception) -> JSONResponse:
        return error_response(
            request,
            404,
            "Message not found in this conversation.",
            code="message_not_found",
            param="parent_message_id",
        )

    @app.exception_handler(NotARegeneration)
    async def _not_regeneration(request: Request, exc: Exception) -> JSONResponse:
        return error_response(
            request, 400, str(exc), code="invalid_request", param="parent_message_id"
        )

    @app.exception_handler(SessionOwnedByAnotherUser)
    @app.exception_handler(InvalidSession)  # an id no check let through: still never a path
    async def _foreign_session(request: Request, exc: Exception) -> JSONResponse:
        return error_response(
            request, 404, "Session not found.", code="session_not_found", param="session_id"
        )

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        status_code, message, param, code = _describe_validation(exc)
        if request.url.path.startswith("/v1/"):
            status_code = 400  # OpenAI reports every malformed request as 400
        return error_response(request, status_code, message, code=code, param=param)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(
            request, exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None)
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("Unhandled error on %s %s", request.method, request.url.path)
        return error_response(
            request, 500, "Internal server error; the details are in the server log."
        )
