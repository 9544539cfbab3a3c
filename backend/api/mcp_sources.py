"""The data sources as MCP tools: list them, read a source's tables (those a question
needs), run a read-only query, and attach sources to a session for `ask` and
`run_python` (whose code then calls `sql(name, query)`). Each acts as the caller: a
source they may not see is "not found", as in the REST API."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from backend.api.mcp_errors import as_tool_errors
from backend.core.services import Services
from backend.storage import DataSource, User
from backend.storage.sessions import session_key
from backend.tools.data_sources.catalog import describe, pick_tables

# One line each, for a model to act on (as mcp_server.py's).
DESCRIBE = (
    "A data source's tables, columns, keys, sample values and notes; with a question, only "
    "the tables it needs."
)
QUERY = "Run one read-only SQL query on a data source; at most max_rows rows come back."
ATTACH = (
    "Attach exactly these data sources to a session (started if new); its ask and run_python "
    "code can then query them with sql(name, query)."
)
DESCRIBED_TABLES = 50  # a source described without a question: its first tables
MAX_ROWS = 1000
MAX_BYTES = 4 * 1024**2  # of a query's rows (as Arrow holds them) sent back to the host


class SourceInfo(BaseModel):
    source_id: str
    name: str  # how code names it: sql(name, query)
    kind: str
    description: str
    owner: str
    tables: int


class SourceList(BaseModel):
    sources: list[SourceInfo]


class QueryRows(BaseModel):
    columns: list[str]
    rows: list[list[Any]]
    row_count: int
    truncated: bool


def add_source_tools(
    server: MCPServer, services: Services, caller: Callable[[Context], User]
) -> None:
    sources = services.data_sources

    def listed(found: Iterable[DataSource]) -> SourceList:
        infos = []
        for source in found:
            owner = services.store.get_user_by_id(source.user_id)
            infos.append(
                SourceInfo(
                    source_id=source.id,
                    name=source.name,
                    kind=source.kind,
                    description=source.description,
                    owner=owner.username if owner else "",
                    tables=len(sources.catalog(source).tables),
                )
            )
        return SourceList(sources=infos)

    @server.tool()
    async def list_data_sources(ctx: Context) -> SourceList:
        """List the read-only databases you own or that are shared with you."""
        user = caller(ctx)
        return listed(await run_in_threadpool(sources.visible, user.id))

    @server.tool(description=DESCRIBE)
    async def describe_data_source(source_id: str, ctx: Context, question: str = "") -> str:
        user = caller(ctx)
        with as_tool_errors():
            source = sources.get(user.id, source_id)
        notes = sources.notes(source)
        catalog = sources.catalog(source)
        tables = (
            pick_tables(catalog, question, notes) if question else catalog.tables[:DESCRIBED_TABLES]
        )
        header = f"{source.name} ({source.kind}): {len(catalog.tables)} tables"
        return f"{header}\n{describe(tables, notes)}"

    @server.tool(description=QUERY)
    async def query_data_source(
        source_id: str, sql: str, ctx: Context, max_rows: int = 100
    ) -> QueryRows:
        user = caller(ctx)
        sink = io.BytesIO()
        with as_tool_errors():
            source = sources.get(user.id, source_id)
            answer = await sources.query(
                user.id,
                source,
                sql,
                sink,
                max_rows=max(1, min(max_rows, MAX_ROWS)),
                max_bytes=MAX_BYTES,
            )
        table = pa.ipc.open_stream(sink.getvalue()).read_all()
        return QueryRows(
            columns=answer.columns,
            rows=[list(row.values()) for row in table.to_pylist()],
            row_count=answer.rows,
            truncated=answer.truncated,
        )

    @server.tool(description=ATTACH)
    async def attach_data_sources(
        session_id: str, source_ids: list[str], ctx: Context
    ) -> SourceList:
        user = caller(ctx)
        with as_tool_errors():
            key = session_key(user.id, session_id)
            services.store.conversation_for_session(user.id, key, "")
            attached = sources.attach(user.id, key, source_ids)
        return listed(attached)
