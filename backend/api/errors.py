"""Every error leaves the server as a clear 4xx/5xx body, never a stack trace.

`/v1/*` routes answer in OpenAI's shape, `{"error": {message, type, param, code}}`,
so the official SDK raises its own exception types; other routes answer
`{"detail": message}` as FastAPI does.

`DOMAIN_ERRORS` is the one table of the domain's exceptions and the answer each gets: a
route lets them through, one handler words them, and the MCP tools say the same
(mcp_errors.py). Where one exception means something else in a context (a bad upload
name, a folder an upload cannot use), a small module beside the routes says so
(upload_checks.py, container_files.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from backend.api.disconnect import ClientGone
from backend.core.branches import MessageNotFound, NotARegeneration
from backend.core.containers import ContainerExpired, ContainerFileNotFound, ContainerNotFound
from backend.core.evals.dabench import InvalidEvalSet
from backend.core.evals.jobs import EvalRunBusy, EvalRunNotFound
from backend.core.evals.sets import EvalSetNotFound
from backend.core.group_rights import ModelNotAllowed
from backend.core.limits import LimitReached
from backend.core.mcp_registry import McpRefused
from backend.core.python_coder_service import ExecutorUnavailable, UnknownSession
from backend.core.responses import ResponseNotFound
from backend.core.runs import RunInProgress
from backend.core.source_access import SourceInvalid, SourceNotFound, SourceReadOnly
from backend.core.user_files import UserFileNotFound
from backend.files import UnsafeArchive, UnsupportedFileType
from backend.files.catalog import FileNotInWorkspace
from backend.files.table_downloads import TooManyRowsForXlsx, XlsxFailed
from backend.files.tables import BadTableQuery, TableBusy, TableNotFound, TableUnreadable
from backend.llm import LLMError
from backend.models.errors import ErrorBody, OpenAIErrorBody
from backend.observability.tracing import current_trace_id
from backend.storage import (
    GroupNameTaken,
    McpServerNameTaken,
    SessionOwnedByAnotherUser,
    StoreBusy,
    StoreFull,
    StoreUnavailable,
    UsernameTaken,
)
from backend.storage.s3_objects import S3Error
from backend.storage.sessions import InvalidSession
from backend.storage.workspaces import NotARegularFile, UnsafePath
from backend.tools.sandbox.admission import SandboxRefused
from backend.tools.sandbox.data_channel import QueryRefused

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


# The domain's exceptions, each with the answer it gets wherever it is raised (a class
# not listed gets its nearest listed base class's).


def _llm_error(exc: LLMError) -> ApiError:
    param = {"model_not_found": "model", "context_length_exceeded": "messages"}.get(exc.code)
    return ApiError(exc.status_code, exc.message, code=exc.code, param=param)


def _limit_reached(exc: LimitReached) -> ApiError:
    headers = None if exc.retry_after is None else {"Retry-After": f"{exc.retry_after:.0f}"}
    return ApiError(exc.status_code, exc.message, code=exc.code, headers=headers)


def _sandbox_refused(exc: SandboxRefused) -> ApiError:
    headers = {"Retry-After": f"{exc.retry_after:.0f}"}
    return ApiError(429, exc.message, code="too_many_sandboxes", headers=headers)


def _unknown_session(exc: UnknownSession) -> ApiError:
    message = f"Session '{exc.session_id}' not found: upload a file to it or chat in it first."
    return ApiError(404, message, code="session_not_found")


def _container_expired(exc: ContainerExpired) -> ApiError:
    container = exc.container
    when = datetime.fromtimestamp(container.expires_at(), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return ApiError(
        400,
        f"Container {container.id} expired at {when}, {container.expires_minutes} minutes after "
        "it was last active: its sandbox has ended and it takes no more code or files. Create "
        "a new container (the conversation it held is kept).",
        code="container_expired",
        param="container_id",
    )


def _mcp_refused(exc: McpRefused) -> ApiError:
    if exc.param == "secrets":  # a stdio server's environment variable
        return ApiError(400, f"{exc}.", code="secret_not_allowed", param="secrets")
    return ApiError(422, f"{exc}.", code="program_not_allowed", param="command")


def _bad_path(exc: UnsafePath | NotARegularFile) -> ApiError:
    return ApiError(400, f"Invalid file path: {exc}", code="bad_path")


def _no_session(exc: SessionOwnedByAnotherUser | InvalidSession) -> ApiError:
    return ApiError(404, "Session not found.", code="session_not_found", param="session_id")


DOMAIN_ERRORS: dict[type[Exception], Callable[[Any], ApiError]] = {
    # The model, the database, S3 and the limits on the server's work
    LLMError: _llm_error,
    S3Error: lambda exc: ApiError(exc.status, str(exc), code=exc.code),
    StoreBusy: lambda exc: ApiError(
        503,
        "The database is busy (another process holds it): try again shortly.",
        code="store_busy",
        headers={"Retry-After": "5"},
    ),
    StoreUnavailable: lambda exc: ApiError(
        503,
        "The database is not reachable: try again shortly.",
        code="store_unavailable",
        headers={"Retry-After": "5"},
    ),
    StoreFull: lambda exc: ApiError(
        507,
        "The server's disk is full: nothing was saved. Free some space and try again.",
        code="insufficient_storage",
    ),
    LimitReached: _limit_reached,
    ModelNotAllowed: lambda exc: ApiError(
        403,
        f"You may not use the model '{exc.model}': your groups do not include it. Pick one "
        "that GET /v1/models lists for you, or ask an admin.",
        code="model_not_allowed",
        param="model",
    ),
    SandboxRefused: _sandbox_refused,
    ExecutorUnavailable: lambda exc: ApiError(503, str(exc), code="executor_unavailable"),
    # Sessions and their messages
    UnknownSession: _unknown_session,
    SessionOwnedByAnotherUser: _no_session,
    InvalidSession: _no_session,  # an id no check let through: still never a path
    MessageNotFound: lambda exc: ApiError(
        404,
        "Message not found in this conversation.",
        code="message_not_found",
        param="parent_message_id",
    ),
    NotARegeneration: lambda exc: ApiError(
        400, str(exc), code="invalid_request", param="parent_message_id"
    ),
    RunInProgress: lambda exc: ApiError(
        409,
        "A run is already in progress in this conversation: wait for it or stop it.",
        code="run_in_progress",
    ),
    # A session's files (a file named in a request)
    FileNotInWorkspace: lambda exc: ApiError(
        404, f"File not found in the session: {exc}", code="file_not_found"
    ),
    UnsupportedFileType: lambda exc: ApiError(415, str(exc), code="unsupported_file_type"),
    UnsafePath: _bad_path,
    NotARegularFile: _bad_path,
    UnsafeArchive: lambda exc: ApiError(400, str(exc), code="unsafe_archive"),
    # The tables runs showed
    TableNotFound: lambda exc: ApiError(404, "Table not found.", code="table_not_found"),
    BadTableQuery: lambda exc: ApiError(400, str(exc), code="bad_table_query"),
    TooManyRowsForXlsx: lambda exc: ApiError(400, str(exc), code="too_many_rows_for_xlsx"),
    XlsxFailed: lambda exc: ApiError(
        503,
        "The server could not build this XLSX file; the CSV and Parquet downloads work.",
        code="xlsx_failed",
    ),
    TableUnreadable: lambda exc: ApiError(
        422,
        "This table's file is not a table the server can read (not Parquet, or damaged).",
        code="table_unreadable",
    ),
    TableBusy: lambda exc: ApiError(
        503,
        "The server's table engine has no memory left for this query now: other queries "
        "hold it, or this one sorts more than fits. Try again shortly, or filter first.",
        code="server_busy",
        headers={"Retry-After": "5"},
    ),
    # OpenAI's Responses, Files and Containers APIs
    ResponseNotFound: lambda exc: ApiError(
        404,
        f"No response '{exc.response_id}' to continue.",
        code="response_not_found",
        param="previous_response_id",
    ),
    UserFileNotFound: lambda exc: ApiError(
        404, f"No such File object: {exc.file_id[:80]}", code="file_not_found", param="file_id"
    ),
    ContainerNotFound: lambda exc: ApiError(
        404,
        f"No such container: {exc.container_id[:80]}",
        code="container_not_found",
        param="container_id",
    ),
    ContainerExpired: _container_expired,
    ContainerFileNotFound: lambda exc: ApiError(
        404, f"No such container file: {exc.file_id[:80]}", code="file_not_found", param="file_id"
    ),
    # Evaluations
    EvalSetNotFound: lambda exc: ApiError(
        404, "Evaluation set not found.", code="eval_set_not_found"
    ),
    EvalRunNotFound: lambda exc: ApiError(
        404, "Evaluation run not found.", code="eval_run_not_found"
    ),
    InvalidEvalSet: lambda exc: ApiError(422, str(exc), code="invalid_eval_set"),
    EvalRunBusy: lambda exc: ApiError(
        409,
        "You already have an evaluation run going: wait for it or stop it.",
        code="eval_run_in_progress",
    ),
    # Users and MCP servers (admins)
    UsernameTaken: lambda exc: ApiError(409, f"A user named '{exc.username}' already exists."),
    GroupNameTaken: lambda exc: ApiError(
        409, f"A group named '{exc}' already exists.", code="name_taken", param="name"
    ),
    McpServerNameTaken: lambda exc: ApiError(
        409, f"An MCP server named '{exc}' already exists.", code="name_taken"
    ),
    McpRefused: _mcp_refused,
    # Data sources
    SourceNotFound: lambda exc: ApiError(
        404, "Data source not found.", code="data_source_not_found", param="source_id"
    ),
    SourceReadOnly: lambda exc: ApiError(403, str(exc), code="data_source_read_only"),
    SourceInvalid: lambda exc: ApiError(422, str(exc), code="invalid_data_source", param=exc.param),
    QueryRefused: lambda exc: ApiError(400, _refused_query(exc), code="query_failed", param="sql"),
}


def _refused_query(exc: QueryRefused) -> str:
    if not exc.nearest:
        return str(exc)
    return f"{exc} (the catalog's nearest names: {', '.join(exc.nearest)})"


# Those the server's log hears of too: the operator has something to fix.
_LOGGED: dict[type[Exception], tuple[int, str]] = {
    StoreBusy: (logging.WARNING, "The database stayed locked: %s"),
    StoreUnavailable: (logging.ERROR, "The database is not reachable: %s"),
    StoreFull: (logging.ERROR, "The database's disk is full: %s"),
}


def api_error(exc: Exception) -> ApiError:
    """The answer to `exc`: itself if an `ApiError`, else its table entry (`LookupError`
    for an exception the table does not know)."""
    if isinstance(exc, ApiError):
        return exc
    for kind in type(exc).__mro__:
        answer = DOMAIN_ERRORS.get(kind)
        if answer is not None:
            return answer(exc)
    raise LookupError(f"No answer for {type(exc).__name__}")


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
    app.add_exception_handler(ApiError, _answer)
    for kind in DOMAIN_ERRORS:
        app.add_exception_handler(kind, _answer)

    @app.exception_handler(ClientGone)
    async def _client_gone(request: Request, exc: ClientGone) -> Response:
        return Response(status_code=499)  # nobody is listening any more

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


async def _answer(request: Request, exc: Exception) -> JSONResponse:
    """An `ApiError`, or a domain error answered as `DOMAIN_ERRORS` says."""
    for kind, (level, text) in _LOGGED.items():
        if isinstance(exc, kind):
            logger.log(level, text, exc)
    error = api_error(exc)
    return error_response(
        request,
        error.status_code,
        error.message,
        code=error.code,
        param=error.param,
        headers=error.headers,
    )
