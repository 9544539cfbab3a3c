"""A table as a download: CSV or XLSX (filtered and sorted as asked), or its Parquet.

Each is an iterator of bytes for a streamed response, read from DuckDB a batch at a
time, so the server holds one batch, not the table. An XLSX sheet holds at most
1,048,576 rows, its header included, and the server builds at most XLSX_MAX_CELLS cells:
a larger table (after its filters) is refused with `TooManyRowsForXlsx` before anything
is sent. The workbook is built in a spool file in the engine's spill folder, and stops
between batches once `stop` is set (its time is up).
"""

from __future__ import annotations

import contextlib
import datetime
import io
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped]
from openpyxl import Workbook  # type: ignore[import-untyped]
from openpyxl.cell.cell import (  # type: ignore[import-untyped]
    ILLEGAL_CHARACTERS_RE,
    WriteOnlyCell,
)

from backend.files.tables import (
    TableQuery,
    columns_of,
    duckdb_errors,
    opened_table,
    row_count,
    scan,
    selection,
    source,
)
from backend.storage.workspaces import Workspaces

XLSX_MAX_ROWS = 1_048_576  # Excel's sheet, header included
XLSX_MAX_CELLS = 20_000_000  # openpyxl writes a cell at a time: about a minute, a GB of spool
BATCH_ROWS = 65_536
CHUNK = 1024 * 1024


class TooManyRowsForXlsx(ValueError):
    def __init__(self, rows: int, columns: int) -> None:
        if rows + 1 > XLSX_MAX_ROWS:
            limit = f"An XLSX sheet holds at most {XLSX_MAX_ROWS:,} rows, its header included"
        else:
            limit = f"The server builds XLSX files of at most {XLSX_MAX_CELLS:,} cells"
        super().__init__(
            f"{limit}; this table has {rows:,} rows of {columns:,} columns. Download it as "
            "CSV or Parquet, or filter it first."
        )


class XlsxStopped(Exception):
    """The workbook was stopped before it was finished (its time was up)."""


def csv_chunks(
    cursor: duckdb.DuckDBPyConnection,
    workspaces: Workspaces,
    session_key: str,
    table_id: str,
    query: TableQuery,
) -> Iterator[bytes]:
    """The table's rows as CSV (a header, then the rows `query` selects, in its order).

    The table is opened and the query checked and started here (TableNotFound,
    BadTableQuery), before a response starts; the rows follow as they are read."""
    stack = contextlib.ExitStack()
    try:
        handle = stack.enter_context(opened_table(workspaces, session_key, table_id))
        batches = _batches(cursor, source(handle), query)
    except BaseException:
        stack.close()
        raise
    return _csv(stack, batches)


def _csv(stack: contextlib.ExitStack, batches: Iterator[Any]) -> Iterator[bytes]:
    with stack:
        header = True
        for batch in batches:
            out = io.BytesIO()
            options = pa_csv.WriteOptions(include_header=header)
            pa_csv.write_csv(pa.Table.from_batches([batch]), out, write_options=options)
            header = False
            yield out.getvalue()


def xlsx_file(
    cursor: duckdb.DuckDBPyConnection,
    workspaces: Workspaces,
    session_key: str,
    table_id: str,
    query: TableQuery,
    spool_dir: Path | None = None,
    stop: threading.Event | None = None,
) -> Iterator[bytes]:
    """The table as one XLSX sheet. Checks its size first (`TooManyRowsForXlsx`); the
    workbook is written to a temporary file in `spool_dir`, which is then sent and deleted."""
    with opened_table(workspaces, session_key, table_id) as handle:
        path = source(handle)
        with duckdb_errors():
            columns = columns_of(cursor, path)
            chosen = selection(query, columns)
            if chosen.where:
                counted = f"SELECT count(*) FROM read_parquet(?){chosen.where}"
                rows = int(cursor.execute(counted, [path, *chosen.parameters]).fetchall()[0][0])
            else:
                rows = row_count(cursor, path)
        if rows + 1 > XLSX_MAX_ROWS or (rows + 1) * max(1, len(columns)) > XLSX_MAX_CELLS:
            raise TooManyRowsForXlsx(rows, len(columns))
        spool = tempfile.TemporaryFile(dir=spool_dir)  # noqa: SIM115 (the response's iterator closes it)
        try:
            workbook = Workbook(write_only=True)
            sheet = workbook.create_sheet(table_id)
            header = True
            for batch in _batches(cursor, path, query):
                if stop is not None and stop.is_set():
                    raise XlsxStopped()
                if header:
                    sheet.append([_xlsx_cell(sheet, name) for name in batch.schema.names])
                    header = False
                for row in zip(*(column.to_pylist() for column in batch.columns), strict=True):
                    sheet.append([_xlsx_cell(sheet, value) for value in row])
            workbook.save(spool)
            spool.seek(0)
        except BaseException:
            spool.close()
            raise
    stack = contextlib.ExitStack()
    stack.callback(spool.close)
    return _spooled(stack, spool)


def _spooled(stack: contextlib.ExitStack, handle: Any) -> Iterator[bytes]:
    with stack:
        while chunk := handle.read(CHUNK):
            yield chunk


def parquet_chunks(workspaces: Workspaces, session_key: str, table_id: str) -> Iterator[bytes]:
    """The table's own Parquet file, the whole table (opened here: TableNotFound)."""
    stack = contextlib.ExitStack()
    handle = stack.enter_context(opened_table(workspaces, session_key, table_id))
    return _spooled(stack, handle)


def _batches(cursor: Any, path: str, query: TableQuery) -> Iterator[Any]:
    """The rows `query` selects, a batch at a time; the query runs (and fails) here."""
    with duckdb_errors():
        chosen = selection(query, columns_of(cursor, path))
        sql = f"{scan(chosen.row_numbers)}{chosen.where}{chosen.order}"
        # A relation streams its rows; a DB-API result's reader copied the whole result
        # first (680 MB of RSS for a 20M-row table, per download).
        relation = cursor.sql(sql, params=[path, *chosen.parameters])
        return _read(relation.to_arrow_reader(BATCH_ROWS))  # a sort runs whole here


def _read(reader: Any) -> Iterator[Any]:
    with contextlib.closing(reader):
        yield from reader


def _xlsx_cell(sheet: Any, value: Any) -> Any:
    """A value openpyxl can write as data: text is never a formula, nor holds characters
    XML cannot; time zones and other types become text."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        value = value.isoformat()
    elif isinstance(value, bytes | list | dict | datetime.timedelta):
        value = str(value)
    if not isinstance(value, str):
        return value
    cell = WriteOnlyCell(sheet, value=ILLEGAL_CHARACTERS_RE.sub("", value))
    cell.data_type = "s"
    return cell
