"""The tables runs showed: summary, pages (sorted, filtered) and downloads, queried on the server.

A table's id comes from its `table` event (`url`). Another user's session, a deleted
one and anything that is not a table id are all 404; a sort or filter the table
cannot take is a 400 (a malformed one, 422); a file that is not a table DuckDB can read,
a 422. Every query and download takes a place from the governor first (`table_query`,
`table_download`: per user, in all, and a time limit, past which DuckDB is interrupted):
a 429 or 503 with Retry-After when there is none, or when DuckDB has no memory left. A
user's downloads together go at most at their kind's pace (`mb_per_second`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Annotated, Any, Literal, TypeVar

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import TypeAdapter, ValidationError
from starlette.concurrency import run_in_threadpool

from backend.api.client_gone import until_gone
from backend.api.deps import (
    CurrentSession,
    FileReader,
    GovernorDep,
    SettingsDep,
    WorkspacesDep,
)
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.api.streamed import ClosingStreamingResponse
from backend.config import Settings
from backend.core.governor import Governor, Held, in_work_thread
from backend.core.limits import LimitReached
from backend.files.table_downloads import csv_chunks, parquet_chunks, xlsx_file
from backend.files.table_summary import summarize
from backend.files.tables import (
    HEAVY_TABLE_BYTES,
    MAX_PAGE,
    SPILL_FOLDER,
    ColumnFilter,
    TableEngine,
    TableQuery,
    engine,
    read_page,
    table_bytes,
    table_path,
)
from backend.models.tables import TablePagePublic, TableSummaryPublic
from backend.storage.sessions import SessionKey
from backend.storage.workspaces import Workspaces

T = TypeVar("T")

router = APIRouter(prefix="/api/sessions", tags=["tables"], responses=CLIENT_ERRORS)
logger = logging.getLogger(__name__)

_FILTERS = TypeAdapter(list[ColumnFilter])
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


async def _lane(
    settings: Settings, workspaces: Workspaces, key: SessionKey, table_id: str
) -> tuple[TableEngine, bool]:
    """The engine for this table's queries, and whether it is the heavy lane's.

    A big table's queries (its Parquet over HEAVY_TABLE_BYTES) run in an engine of their
    own, made in a lower-priority work thread so that DuckDB's threads inherit it
    (backend/core/governor.py): a small table's page never waits behind another user's
    sort of millions of rows, in DuckDB's queue or for the CPU."""
    size = await in_work_thread(table_bytes, workspaces, key, table_id)
    heavy = size > HEAVY_TABLE_BYTES
    memory = settings.TABLE_QUERY_MEMORY_MB
    if heavy:
        spill, spill_mb = settings.DATA_DIR / SPILL_FOLDER, settings.TABLE_QUERY_SPILL_MB
    else:  # a small table's sort fits in memory
        memory, spill, spill_mb = max(16, memory // 2), None, 0
    threads = settings.TABLE_QUERY_THREADS
    made = await in_work_thread(engine, memory, threads, spill, spill_mb, native=heavy)
    return made, heavy


async def _queried(
    governor: Governor,
    user_id: int,
    settings: Settings,
    workspaces: Workspaces,
    key: SessionKey,
    table_id: str,
    work: Callable[..., T],
    *args: object,
) -> T:
    """`work(cursor, workspaces, key, table_id, *args)` in a `table_query` place, on the
    table's engine, interrupted through its cursor."""
    async with governor.hold("table_query", user_id) as held:
        tables, heavy = await _lane(settings, workspaces, key, table_id)
        with tables.cursor() as cursor:
            return await held.run(
                work,
                *(cursor, workspaces, key, table_id, *args),
                interrupt=cursor.interrupt,
                native=heavy,  # DuckDB's: outside the GIL
            )


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


@router.get("/{session_id}/tables/{table_id}")
async def read_table(
    key: CurrentSession,
    table_id: str,
    user: FileReader,
    workspaces: WorkspacesDep,
    settings: SettingsDep,
    governor: GovernorDep,
    request: Request,
) -> TableSummaryPublic:
    """A table's row count, and per column its type, nulls, distinct values, range and mean."""
    table_path(table_id)  # a table's id, or TableNotFound (404)
    work = _queried(governor, user.id, settings, workspaces, key, table_id, summarize)
    summary = await until_gone(request, work, "table summary")  # its wait for a place too
    return TableSummaryPublic.of(table_id, summary)


@router.get("/{session_id}/tables/{table_id}/rows")
async def read_table_rows(
    key: CurrentSession,
    table_id: str,
    user: FileReader,
    workspaces: WorkspacesDep,
    settings: SettingsDep,
    governor: GovernorDep,
    request: Request,
    offset: Annotated[int, Query(ge=0, le=10**12)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
    sort: Sort = None,
    order: Order = "asc",
    filters: Filters = None,
) -> TablePagePublic:
    """A page of the table's rows, sorted by a column and filtered, as DuckDB reads them."""
    table_path(table_id)  # a table's id, or TableNotFound (404)
    query = _query(sort, order, filters)
    work = _queried(
        *(governor, user.id, settings, workspaces, key, table_id),
        *(read_page, query, offset, limit),
    )
    page = await until_gone(request, work, "table page")  # its wait for a place too
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
    key: CurrentSession,
    table_id: str,
    user: FileReader,
    workspaces: WorkspacesDep,
    settings: SettingsDep,
    governor: GovernorDep,
    request: Request,
    format: Annotated[Literal["csv", "parquet", "xlsx"], Query()] = "csv",
    sort: Sort = None,
    order: Order = "asc",
    filters: Filters = None,
) -> StreamingResponse:
    """Download the table as CSV or XLSX (at most 1,048,576 rows with the header: a larger
    one is a 400), filtered and sorted as asked, or as its whole Parquet file."""
    table_path(table_id)  # a table's id, or TableNotFound (404)
    query = _query(sort, order, filters)
    work = contextlib.AsyncExitStack()  # the place and the cursor, until the stream ends
    stop = threading.Event()

    async def begun() -> tuple[Held, Iterator[bytes], Callable[[], None], bool]:
        held = await work.enter_async_context(governor.hold("table_download", user.id))
        tables, heavy = await _lane(settings, workspaces, key, table_id)
        cursor = work.enter_context(tables.cursor())

        def interrupt() -> None:
            stop.set()
            cursor.interrupt()

        if format == "parquet":
            chunks = await held.run(parquet_chunks, workspaces, key, table_id, native=heavy)
            return held, chunks, interrupt, heavy
        if format == "xlsx":  # built whole (in a process of its own) before it is sent
            spill = settings.DATA_DIR / SPILL_FOLDER
            built = await held.run(
                xlsx_file,
                *(cursor, workspaces, key, table_id, query, spill, stop),
                interrupt=interrupt,
            )
            return held, built, interrupt, False  # a file's reads: no native code
        chunks = await held.run(
            *(csv_chunks, cursor, workspaces, key, table_id, query),
            interrupt=interrupt,
            native=heavy,
        )
        return held, chunks, interrupt, heavy

    try:  # a client gone while it waits for a place, or while its XLSX is built, stops it
        held, chunks, interrupt, native = await until_gone(request, begun(), "table download")
    except BaseException:
        await work.aclose()
        raise
    headers = {
        "Content-Disposition": f'attachment; filename="table_{table_id}.{format}"',
        "X-Content-Type-Options": "nosniff",
    }
    body = _sent(work, held, chunks, interrupt, native=native)
    return ClosingStreamingResponse(body, media_type=_MEDIA[format], headers=headers)


async def _sent(
    work: contextlib.AsyncExitStack,
    held: Held,
    chunks: Iterator[bytes],
    interrupt: Callable[[], None],
    *,
    native: bool,
) -> AsyncIterator[bytes]:
    """`chunks`, read in a thread a chunk at a time within the download's time; the place
    and the cursor are given back when it ends, is cut off, or the client goes."""
    async with work:
        try:
            while (
                chunk := await held.run(next, chunks, None, interrupt=interrupt, native=native)
            ) is not None:
                yield chunk
                await held.sent(len(chunk))  # the user's pace (WORK_LIMITS mb_per_second)
        except (LimitReached, OSError) as exc:  # its time, or DuckDB's error through Arrow
            # The answer has begun: ending it early (no last chunk) is how a client hears.
            logger.warning("A table download was cut off: %s", str(exc).splitlines()[0][:200])
            raise
        finally:  # cut off (cancelled) too: the reader pins DuckDB's memory until closed
            with anyio.CancelScope(shield=True):
                await run_in_threadpool(_close, chunks)


def _close(chunks: Iterator[bytes]) -> None:
    close = getattr(chunks, "close", None)
    if close is not None:
        close()
