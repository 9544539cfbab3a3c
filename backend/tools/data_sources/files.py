"""SQLite and DuckDB sources: database files the server keeps, read in the confined
helper process (`backend/files/isolation.py`), never in the server, since a crafted
database file is hostile input for a native parser.

Each source has a helper of its own, which sees the source's folder read-only at
SOURCE_FOLDER (and nothing else of the server's); it opens the file read-only
(`backend/files/databases.py`), runs the one statement and sends back its rows as an
Arrow IPC stream, cut at the query's bounds.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa  # type: ignore[import-untyped]

from backend.files.databases import (
    DatabaseKind,
    add_dataset_table,
    database_catalog,
    open_duckdb,
    open_sqlite,
)
from backend.files.isolation import Confine, IsolatedCallFailed, IsolatedRunner
from backend.storage.data_sources import SourceKind
from backend.tools.data_sources.catalog import Catalog, Table
from backend.tools.data_sources.query import QueryFailed, QueryLimits, SourceAddress, copy_capped
from backend.tools.sandbox.command import SANDBOX_SCRATCH

BATCH_ROWS = 10_000
# A file source's answer, as Arrow holds it: the helper sends it whole, and an answer
# past isolation.MAX_ANSWER (64 MB) would be refused; the query says it was cut.
FILE_ANSWER_BYTES = 48 * 1024**2


class _Batches:
    def __init__(self, schema: pa.Schema, batches: list[pa.RecordBatch]) -> None:
        self.schema = schema
        self.batches = batches

    def __iter__(self) -> Any:
        return iter(self.batches)


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


def run_file_query(path: str, kind: SourceKind, sql: str, limits: QueryLimits) -> bytes:
    """In the helper: the answer to `sql` as an Arrow IPC stream."""
    return _answer(path, "sqlite" if kind == "sqlite" else "duckdb", sql, limits)


def _answer(path: str, kind: DatabaseKind, sql: str, limits: QueryLimits) -> bytes:
    sink = io.BytesIO()
    try:
        if kind == "sqlite":
            with open_sqlite(path) as connection:
                copy_capped(_sqlite_rows(connection, sql, limits), limits, sink)
        else:
            connection = open_duckdb(path)
            timer = threading.Timer(limits.seconds, connection.interrupt)
            timer.start()
            try:
                result = connection.execute(sql)
                if result.description is None:
                    raise QueryFailed("the statement returned no rows: only queries are run here")
                reader = result.to_arrow_reader(BATCH_ROWS)
                copy_capped(reader, limits, sink)
            finally:
                timer.cancel()
                connection.close()
    except QueryFailed as exc:
        raise ValueError(str(exc)) from None
    except Exception as exc:  # sqlite3.Error, duckdb.Error: the database's words
        raise ValueError(str(exc).split("\n")[0]) from None
    return sink.getvalue()


def read_file_catalog(path: str, kind: SourceKind, max_tables: int) -> str:
    """In the helper: the file's catalog as JSON, with samples."""
    engine: DatabaseKind = "sqlite" if kind == "sqlite" else "duckdb"
    try:
        return json.dumps(database_catalog(path, engine, max_tables))
    except Exception as exc:  # sqlite3.Error, duckdb.Error: sent as words only
        raise ValueError(str(exc).split("\n")[0]) from None


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


SOURCE_FOLDER = "/opt/source"  # where a source's helper sees its folder


def confined_to(folder: Path, confine: Confine | None) -> Confine | None:
    """`confine`, with `folder` bound read-only at SOURCE_FOLDER."""
    if confine is None:
        return None

    def confined(argv: list[str], code: Sequence[tuple[Path, str]], **options: Any) -> list[str]:
        return confine(argv, [*code, (folder, SOURCE_FOLDER)], **options)

    return confined


def dataset_table_names(names: Sequence[str]) -> list[str]:
    """A table name for each file name: its stem as an SQL identifier, made unique."""
    found: list[str] = []
    for name in names:
        stem = re.sub(r"[^a-z0-9_]+", "_", name.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower())
        stem = stem.strip("_") or "data"
        if stem[0].isdigit():
            stem = f"t_{stem}"
        table, count = stem[:60], 1
        while table in found:
            count += 1
            table = f"{stem[:56]}_{count}"
        found.append(table)
    return found


def build_dataset(
    folder: Path, files: Sequence[tuple[str, BinaryIO]], confine: Confine | None, timeout: float
) -> None:
    """A DuckDB database at `folder`/database made of `files` (name, open handle): each
    loaded by a helper that may write only in `folder` (its scratch), a table each."""
    if confine is not None:
        base = confine

        def confined(
            argv: list[str], code: Sequence[tuple[Path, str]], **options: Any
        ) -> list[str]:
            return base(argv, code, scratch=folder, **options)

    runner = IsolatedRunner(timeout=timeout, confine=confined if confine is not None else None)
    database = f"{SANDBOX_SCRATCH}/database" if confine is not None else str(folder / "database")
    try:
        for (name, handle), table in zip(
            files, dataset_table_names([n for n, _ in files]), strict=True
        ):
            extension = name.rsplit(".", 1)[-1].lower()
            try:
                runner.call(add_dataset_table, extension, table, database, file=handle)
            except (IsolatedCallFailed, ValueError) as exc:
                raise QueryFailed(f"{name} could not be loaded: {exc}") from None
    finally:
        runner.close()
        shutil.rmtree(folder / ".spill", ignore_errors=True)


class FileSource:
    """A database file, read through its source's confined helper; one query at a time."""

    broken = False

    def __init__(self, address: SourceAddress, runner: IsolatedRunner) -> None:
        assert address.path is not None
        self.address = address
        self.runner = runner
        # The file as the helper names it: through its folder's binding, or (unconfined) as is.
        name = address.path.name
        self.path = f"{SOURCE_FOLDER}/{name}" if runner.confined else str(address.path)

    def query(self, sql: str, limits: QueryLimits) -> _Batches:
        """At most FILE_ANSWER_BYTES of rows: the helper's answer comes back whole."""
        limits = replace(limits, max_bytes=min(limits.max_bytes, FILE_ANSWER_BYTES))
        try:
            data = self.runner.call(run_file_query, self.path, self.address.kind, sql, limits)
        except IsolatedCallFailed as exc:
            raise QueryFailed(str(exc).replace("the file", "the database file")) from None
        except ValueError as exc:  # the helper's only way to send the database's words
            raise _failed(str(exc)) from None
        reader = pa.ipc.open_stream(data)
        return _Batches(reader.schema, list(reader))

    def catalog(self, max_tables: int) -> Catalog:
        try:
            text = self.runner.call(read_file_catalog, self.path, self.address.kind, max_tables)
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
