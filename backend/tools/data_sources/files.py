"""SQLite and DuckDB sources: database files the server keeps, read in the confined
helper process (`backend/files/isolation.py`), never in the server, since a crafted
database file is hostile input for a native parser.

The server opens the file read-only and hands the helper its descriptor; the helper
opens it read-only again through /proc (SQLite as immutable, DuckDB with no access to
any other file and its configuration locked), runs the one statement and sends back
its rows as an Arrow IPC stream, cut at the query's bounds.
"""

from __future__ import annotations

import io
import os
import re
import sqlite3
import threading
import time
from typing import Any, BinaryIO

import pyarrow as pa  # type: ignore[import-untyped]

from backend.files.isolation import IsolatedCallFailed, IsolatedRunner
from backend.storage.data_sources import SourceKind
from backend.tools.data_sources.catalog import MAX_SAMPLES, Catalog, Column, Table, sample_text
from backend.tools.data_sources.query import QueryFailed, QueryLimits, SourceAddress, copy_capped

BATCH_ROWS = 10_000


class _Batches:
    def __init__(self, schema: pa.Schema, batches: list[pa.RecordBatch]) -> None:
        self.schema = schema
        self.batches = batches

    def __iter__(self) -> Any:
        return iter(self.batches)


def _sqlite(handle: BinaryIO) -> sqlite3.Connection:
    connection = sqlite3.connect(
        f"file:/proc/self/fd/{handle.fileno()}?mode=ro&immutable=1", uri=True
    )
    connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    return connection


def _duckdb(handle: BinaryIO) -> Any:
    import duckdb

    return duckdb.connect(
        f"/proc/self/fd/{handle.fileno()}",
        read_only=True,
        config={
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "lock_configuration": True,
            "threads": 1,
        },
    )


def _sqlite_rows(connection: sqlite3.Connection, sql: str, limits: QueryLimits) -> _Batches:
    deadline = time.monotonic() + limits.seconds
    connection.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
    cursor = connection.execute(sql)
    if cursor.description is None:
        raise QueryFailed("the statement returned no rows: only queries are run here")
    names = [column[0] for column in cursor.description]
    rows = cursor.fetchmany(limits.max_rows + 1)
    arrays = []
    for index in range(len(names)):
        values = [row[index] for row in rows]
        try:
            arrays.append(pa.array(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # SQLite lets a column mix types
            arrays.append(pa.array([None if v is None else str(v) for v in values]))
    table = pa.Table.from_arrays(arrays, names=_distinct(names))
    return _Batches(table.schema, table.to_batches(BATCH_ROWS))


def _distinct(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        count = seen.get(name, 0)
        seen[name] = count + 1
        out.append(f"{name}_{count}" if count else name)
    return out


def run_file_query(handle: BinaryIO, kind: SourceKind, sql: str, limits: QueryLimits) -> bytes:
    """In the helper: the answer to `sql` as an Arrow IPC stream."""
    sink = io.BytesIO()
    try:
        if kind == "sqlite":
            with _sqlite(handle) as connection:
                copy_capped(_sqlite_rows(connection, sql, limits), limits, sink)
        else:
            connection = _duckdb(handle)
            timer = threading.Timer(limits.seconds, connection.interrupt)
            timer.start()
            try:
                result = connection.execute(sql)
                if result.description is None:
                    raise QueryFailed("the statement returned no rows: only queries are run here")
                reader = result.fetch_record_batch(BATCH_ROWS)
                copy_capped(reader, limits, sink)
            finally:
                timer.cancel()
                connection.close()
    except QueryFailed as exc:
        raise ValueError(str(exc)) from None
    except Exception as exc:  # sqlite3.Error, duckdb.Error: the database's words
        raise ValueError(str(exc).split("\n")[0]) from None
    return sink.getvalue()


def read_file_catalog(handle: BinaryIO, kind: SourceKind, max_tables: int) -> str:
    """In the helper: the file's catalog as JSON, with samples."""
    if kind == "sqlite":
        with _sqlite(handle) as connection:
            return _sqlite_catalog(connection, max_tables).to_json()
    connection = _duckdb(handle)
    try:
        return _duckdb_catalog(connection, max_tables).to_json()
    finally:
        connection.close()


def _sqlite_catalog(connection: sqlite3.Connection, max_tables: int) -> Catalog:
    found = []
    listed = connection.execute(
        "SELECT name, type FROM sqlite_schema WHERE type IN ('table', 'view')"
        " AND name NOT LIKE 'sqlite_%' ORDER BY name LIMIT ?",
        (max_tables,),
    ).fetchall()
    for name, kind in listed:
        quoted = '"' + name.replace('"', '""') + '"'
        info = connection.execute(f"PRAGMA table_info({quoted})").fetchall()
        keys = {
            row[3]: f"{row[2]}.{row[4]}"
            for row in connection.execute(f"PRAGMA foreign_key_list({quoted})").fetchall()
        }
        sample_rows = connection.execute(f"SELECT * FROM {quoted} LIMIT {MAX_SAMPLES}").fetchall()
        rows = connection.execute(f"SELECT count(*) FROM {quoted}").fetchone()[0]
        columns = [
            Column(
                name=column[1],
                type=column[2] or "any",
                key="primary" if column[5] else "",
                references=keys.get(column[1], ""),
                samples=[sample_text(r[i]) for r in sample_rows if r[i] is not None],
            )
            for i, column in enumerate(info)
        ]
        found.append(Table(name=name, columns=columns, rows=rows, kind=kind))
    return Catalog(tables=found)


def _duckdb_catalog(connection: Any, max_tables: int) -> Catalog:
    listed = connection.execute(
        "SELECT schema_name, table_name, estimated_size, 'table' FROM duckdb_tables()"
        " WHERE NOT internal UNION ALL SELECT schema_name, view_name, NULL, 'view'"
        " FROM duckdb_views() WHERE NOT internal ORDER BY 1 <> 'main', 1, 2 LIMIT ?",
        [max_tables],
    ).fetchall()
    found = []
    for schema, name, rows, kind in listed:
        qualified = name if schema == "main" else f"{schema}.{name}"
        quoted = ".".join('"' + p.replace('"', '""') + '"' for p in (schema, name))
        described = connection.execute(
            "SELECT column_name, data_type FROM duckdb_columns()"
            " WHERE schema_name = ? AND table_name = ? ORDER BY column_index",
            [schema, name],
        ).fetchall()
        sample_rows = connection.execute(f"SELECT * FROM {quoted} LIMIT {MAX_SAMPLES}").fetchall()
        columns = [
            Column(
                name=column,
                type=kind_of,
                samples=[sample_text(r[i]) for r in sample_rows if r[i] is not None],
            )
            for i, (column, kind_of) in enumerate(described)
        ]
        found.append(Table(name=qualified, columns=columns, rows=rows, kind=kind))
    return Catalog(tables=found)


_MISSING = (
    re.compile(r"no such (?:table|column): (?:\w+\.)?(\w+)"),  # SQLite
    re.compile(
        r'(?:Table|Referenced column) (?:with name )?"?(\w+)"? (?:does not exist|not found)'
    ),
)


def _failed(message: str) -> QueryFailed:
    for pattern in _MISSING:
        if found := pattern.search(message):
            return QueryFailed(message, missing=found.group(1))
    return QueryFailed(message)


class FileSource:
    """A database file, read through the confined helper; one query at a time."""

    broken = False

    def __init__(self, address: SourceAddress, runner: IsolatedRunner) -> None:
        assert address.path is not None
        self.address = address
        self.runner = runner

    def _open(self) -> BinaryIO:
        assert self.address.path is not None
        fd = os.open(self.address.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        return os.fdopen(fd, "rb")

    def query(self, sql: str, limits: QueryLimits) -> _Batches:
        with self._open() as handle:
            try:
                data = self.runner.call(run_file_query, self.address.kind, sql, limits, file=handle)
            except IsolatedCallFailed as exc:
                raise QueryFailed(str(exc).replace("the file", "the database file")) from None
            except ValueError as exc:  # the helper's only way to send the database's words
                raise _failed(str(exc)) from None
        reader = pa.ipc.open_stream(data)
        return _Batches(reader.schema, list(reader))

    def catalog(self, max_tables: int) -> Catalog:
        with self._open() as handle:
            try:
                text = self.runner.call(
                    read_file_catalog, self.address.kind, max_tables, file=handle
                )
            except (IsolatedCallFailed, ValueError) as exc:
                raise QueryFailed(str(exc)) from None
        return Catalog.from_json(text)

    def samples(self, table: Table, seconds: float) -> Table:
        return table  # the helper read them with the catalog

    def check_account(self) -> None:
        """A file has no account: the helper opens it read-only."""

    def end(self) -> None:
        """Nothing stays open between queries."""

    def cancel(self) -> None:
        """The helper's own time limit stops the query."""

    def close(self) -> None:
        """The helper is the readers' to close."""
