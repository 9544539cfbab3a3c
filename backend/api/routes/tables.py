"""The tables runs showed: summary, pages (sorted, filtered) and downloads, queried on the server.

A table's id comes from its `table` event (`url`). Another user's session, a deleted
one and anything that is not a table id are all 404; a sort or filter the table
cannot take is a 400 (a malformed one, 422).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse
from pydantic import TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool

from backend.api.deps import FileReader, SettingsDep, SharedDep, StoreDep, WorkspacesDep
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.api.routes.files import current_session
from backend.config import Settings
from backend.files.table_downloads import (
    TooManyRowsForXlsx,
    csv_chunks,
    parquet_chunks,
    xlsx_file,
)
from backend.files.table_summary import summarize
from backend.files.tables import (
    MAX_PAGE,
    BadTableQuery,
    ColumnFilter,
    TableEngine,
    TableNotFound,
    TableQuery,
    engine,
    read_page,
    table_path,
)
from backend.models.common import SessionId
from backend.models.tables import TablePagePublic, TableSummaryPublic

router = APIRouter(prefix="/api/sessions", tags=["tables"], responses=CLIENT_ERRORS)

_FILTERS = TypeAdapter(list[ColumnFilter])
_NOT_FOUND = "Table not found."
_MEDIA = {
    "csv": "text/csv; charset=utf-8",
    "parquet": "application/vnd.apache.parquet",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}

Sort = Annotated[str | None, Query(max_length=300, description="A column to sort by.")]
Order = Annotated[Literal["asc", "desc"], Query()]
Filters = Annotated[
    str | None,
    Query(
        max_length=2_000,
        description='A JSON list of filters: [{"column": "city", "op": "contains", '
        '"value": "par"}]; ops: eq, ne, contains, gt, ge, lt, le. All must hold.',
    ),
]


def _engine(settings: Settings) -> TableEngine:
    return engine(settings.TABLE_QUERY_MEMORY_MB, settings.TABLE_QUERY_THREADS)


def _query(sort: str | None, order: str, filters: str | None) -> TableQuery:
    try:
        parsed = _FILTERS.validate_json(filters) if filters else []
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ApiError(
            422, f"Invalid filters ({where}): {first['msg']}", code="bad_filters"
        ) from None
    return TableQuery(sort=sort, descending=order == "desc", filters=parsed)


async def _table(
    store: StoreDep, shared: SharedDep, user: FileReader, session_id: str, table_id: str
) -> str:
    """The key of the user's session that holds `table_id` (404 for anything else)."""
    key = await current_session(store, shared, user, session_id)
    try:
        table_path(table_id)
    except TableNotFound:
        raise ApiError(404, _NOT_FOUND, code="table_not_found") from None
    return key


@router.get("/{session_id}/tables/{table_id}")
async def read_table(
    session_id: SessionId,
    table_id: str,
    user: FileReader,
    store: StoreDep,
    shared: SharedDep,
    workspaces: WorkspacesDep,
    settings: SettingsDep,
) -> TableSummaryPublic:
    """A table's row count, and per column its type, nulls, distinct values, range and mean."""
    key = await _table(store, shared, user, session_id, table_id)
    try:
        summary = await run_in_threadpool(summarize, _engine(settings), workspaces, key, table_id)
    except TableNotFound:
        raise ApiError(404, _NOT_FOUND, code="table_not_found") from None
    return TableSummaryPublic.of(table_id, summary)


@router.get("/{session_id}/tables/{table_id}/rows")
async def read_table_rows(
    session_id: SessionId,
    table_id: str,
    user: FileReader,
    store: StoreDep,
    shared: SharedDep,
    workspaces: WorkspacesDep,
    settings: SettingsDep,
    offset: Annotated[int, Query(ge=0, le=10**12)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    sort: Sort = None,
    order: Order = "asc",
    filters: Filters = None,
) -> TablePagePublic:
    """A page of the table's rows, sorted by a column and filtered, as DuckDB reads them."""
    key = await _table(store, shared, user, session_id, table_id)
    query = _query(sort, order, filters)
    try:
        page = await run_in_threadpool(
            read_page, _engine(settings), workspaces, key, table_id, query, offset, limit
        )
    except TableNotFound:
        raise ApiError(404, _NOT_FOUND, code="table_not_found") from None
    except BadTableQuery as exc:
        raise ApiError(400, str(exc), code="bad_table_query") from None
    return TablePagePublic.of(page)


_DOWNLOAD: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The table (CSV and XLSX: filtered and sorted as asked).",
        "content": {media: {} for media in _MEDIA.values()},
    }
}


@router.get(
    "/{session_id}/tables/{table_id}/download",
    response_class=StreamingResponse,
    responses=_DOWNLOAD,
)
async def download_table(
    session_id: SessionId,
    table_id: str,
    user: FileReader,
    store: StoreDep,
    shared: SharedDep,
    workspaces: WorkspacesDep,
    settings: SettingsDep,
    format: Annotated[Literal["csv", "parquet", "xlsx"], Query()] = "csv",
    sort: Sort = None,
    order: Order = "asc",
    filters: Filters = None,
) -> StreamingResponse:
    """Download the table as CSV or XLSX (at most 1,048,576 rows with the header: a larger
    one is a 400), filtered and sorted as asked, or as its whole Parquet file."""
    key = await _table(store, shared, user, session_id, table_id)
    query = _query(sort, order, filters)
    tables = _engine(settings)
    chunks: Iterator[bytes]
    try:
        if format == "parquet":
            chunks = await run_in_threadpool(parquet_chunks, workspaces, key, table_id)
        elif format == "xlsx":
            chunks = await run_in_threadpool(xlsx_file, tables, workspaces, key, table_id, query)
        else:
            chunks = await run_in_threadpool(csv_chunks, tables, workspaces, key, table_id, query)
    except TableNotFound:
        raise ApiError(404, _NOT_FOUND, code="table_not_found") from None
    except BadTableQuery as exc:
        raise ApiError(400, str(exc), code="bad_table_query") from None
    except TooManyRowsForXlsx as exc:
        raise ApiError(400, str(exc), code="too_many_rows_for_xlsx") from None
    headers = {
        "Content-Disposition": f'attachment; filename="table_{table_id}.{format}"',
        "X-Content-Type-Options": "nosniff",
    }
    return StreamingResponse(chunks, media_type=_MEDIA[format], headers=headers)
