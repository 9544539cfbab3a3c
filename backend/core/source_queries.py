"""Queries on data sources: each (from a run's `sql()`, the API or MCP, and the catalog's
reads) takes a `source_query` place from the governor, places per user and on the server,
and runs on a connection the readers hold, in the governor's thread, within the time the
place gives; the database's own statement timeout comes first."""

from __future__ import annotations

from typing import Any

from backend.core.source_access import SourceAccess
from backend.storage import DataSource
from backend.tools.data_sources.catalog import nearest
from backend.tools.data_sources.query import (
    QueryAnswer,
    QueryFailed,
    QueryLimits,
    Sink,
    SourceAddress,
    copy_capped,
)
from backend.tools.data_sources.readers import SourceConnection
from backend.tools.sandbox.data_channel import QueryRefused

WORK_KIND = "source_query"
MAX_SQL = 100_000
STATEMENT_SHARE = 0.8  # of the source_query place's seconds, for the statement itself


class SourceQueries(SourceAccess):
    def _limits(self, seconds: float, max_rows: int = 0, max_bytes: int = 0) -> QueryLimits:
        """The database's own timeout comes first, so its words say what stopped the query;
        the governor's is the backstop (a 503)."""
        rows = min(max_rows, self.max_rows) if max_rows else self.max_rows
        size = min(max_bytes, self.max_bytes) if max_bytes else self.max_bytes
        return QueryLimits(seconds=seconds * STATEMENT_SHARE, max_rows=rows, max_bytes=size)

    async def _with_connection(
        self, user_id: int, source: DataSource, address: SourceAddress, work: Any
    ) -> Any:
        async with self.governor.hold(WORK_KIND, user_id) as held:
            connection: SourceConnection | None = None

            def run() -> Any:
                nonlocal connection
                connection = self.readers.take(source.id, address)
                return work(connection, held)

            def interrupt() -> None:
                if connection is not None:
                    connection.cancel()

            try:
                return await held.run(run, interrupt=interrupt, native=True)
            finally:
                if connection is not None:
                    self.readers.give_back(source.id, address, connection)

    async def query(
        self,
        user_id: int,
        source: DataSource,
        sql: str,
        sink: Sink,
        max_rows: int = 0,
        max_bytes: int = 0,
    ) -> QueryAnswer:
        """Run `sql` on `source` for `user_id`, its rows (at most `max_rows` if given)
        written to `sink` as an Arrow stream. `QueryRefused` (with the catalog's nearest
        names) if it fails."""
        if not sql.strip() or len(sql) > MAX_SQL:
            raise QueryRefused(f"a query is 1 to {MAX_SQL:,} characters")
        address = self._address(source)

        def work(connection: SourceConnection, held: Any) -> QueryAnswer:
            limits = self._limits(held.seconds, max_rows, max_bytes)
            rows = connection.query(sql, limits)
            try:
                return copy_capped(rows, limits, sink)
            finally:
                connection.end()

        try:
            answer: QueryAnswer = await self._with_connection(user_id, source, address, work)
        except QueryFailed as failed:
            names = (
                nearest(self.catalog(source), failed.missing, failed.missing_in)
                if failed.missing
                else []
            )
            raise QueryRefused(str(failed), names) from None
        return answer
