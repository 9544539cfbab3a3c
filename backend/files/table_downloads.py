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
import io
import itertools
import logging
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

import duckdb
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.csv as pa_csv  # type: ignore[import-untyped]

from backend.files.tables import (
    Column,
    TableBusy,
    TableQuery,
    columns_of,
    duckdb_errors,
    opened_table,
    row_count,
    scan,
    selection,
    source,
)
from backend.storage.sessions import SessionKey
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


class XlsxFailed(Exception):
    """The process building the workbook failed (the log says why)."""


_XLSX_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from backend.files.xlsx_worker import main; main()"
)
SOURCE_ROOT = Path(__file__).resolve().parents[2]  # holds the `backend` package
logger = logging.getLogger(__name__)


def csv_chunks(
    cursor: duckdb.DuckDBPyConnection,
    workspaces: Workspaces,
    session_key: SessionKey,
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
    session_key: SessionKey,
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
        if spool_dir is not None:  # the engine makes it only when it may spill
            spool_dir.mkdir(parents=True, exist_ok=True)
        spool = tempfile.TemporaryFile(dir=spool_dir)  # noqa: SIM115 (the response's iterator closes it)
        try:
            _build_xlsx(_batches(cursor, path, query), columns, table_id, spool, stop)
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


def parquet_chunks(
    workspaces: Workspaces, session_key: SessionKey, table_id: str
) -> Iterator[bytes]:
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


def _build_xlsx(
    batches: Iterator[Any],
    columns: list[Column],
    sheet_name: str,
    spool: BinaryIO,
    stop: threading.Event | None,
) -> None:
    """Stream `batches` to an xlsx_worker process, which writes the workbook to `spool`;
    `stop` (its time is up) kills it. XlsxFailed if it does not finish; TableBusy if DuckDB
    fails on the way (out of memory: its error comes through Arrow as an OSError)."""
    argv = [sys.executable, "-I", "-c", _XLSX_BOOT, str(SOURCE_ROOT), sheet_name]
    child = subprocess.Popen(
        [*argv, str(spool.fileno())],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        pass_fds=(spool.fileno(),),
        cwd="/",
        env={"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"},
        start_new_session=True,
    )
    assert child.stdin is not None and child.stderr is not None
    try:
        _send_batches(child.stdin, batches, columns, stop)
        while child.poll() is None:
            if stop is not None and stop.wait(0.05):
                raise XlsxStopped()
    except BaseException:
        child.kill()
        raise
    finally:
        child.wait()
        errors = child.stderr.read()[-2000:].decode(errors="replace")
        child.stderr.close()
    if child.returncode != 0:
        logger.error("The XLSX builder failed (%s): %s", child.returncode, errors)
        raise XlsxFailed()


def _send_batches(
    pipe: IO[bytes], batches: Iterator[Any], columns: list[Column], stop: threading.Event | None
) -> None:
    """The rows as an Arrow IPC stream (the first batch's schema; an empty table's, text)."""
    try:
        first = next(batches, None)
        if first is not None:
            schema = first.schema
        else:
            schema = pa.schema([(column.name, pa.string()) for column in columns])
        with pipe, pa.ipc.new_stream(pipe, schema) as writer:
            for batch in itertools.chain([] if first is None else [first], batches):
                if stop is not None and stop.is_set():
                    raise XlsxStopped()
                writer.write_batch(batch)
    except BrokenPipeError:
        return  # the builder ended early: its exit status says why
    except OSError as exc:
        if stop is not None and stop.is_set():
            raise XlsxStopped() from None  # DuckDB was interrupted
        logger.warning("An XLSX download's query failed: %s", str(exc).splitlines()[0][:200])
        raise TableBusy() from None
