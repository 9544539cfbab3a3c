"""The tables runs showed: their summary and their pages, queried with DuckDB on the server.

A table is `outputs/.tables/<id>.parquet` in a session's workspace (the sandbox's
`shown_tables.py` writes it). Every query opens that file through the workspace's own
safe open (no link followed, regular files only) and gives DuckDB the open descriptor
(`/proc/self/fd/N`), so sandboxed code cannot swap in another file. Sorting, filtering
and paging run in DuckDB over the Parquet, so a 10M-row table pages like a small one:
only the page's rows are read into Python. One DuckDB database per process bounds
memory, threads and spill for all queries (TABLE_QUERY_MEMORY_MB, TABLE_QUERY_THREADS,
TABLE_QUERY_SPILL_MB, in DATA_DIR/tmp/duckdb); how many run at once, per user and in all,
and for how long, is the caller's (the API's governor), which stops one with the cursor's
`interrupt`. DuckDB's own errors become `TableUnreadable` (not a table it can read) or
`TableBusy` (out of memory or spill room). Everything here blocks: call it off the event loop.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import logging
import math
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Literal

import duckdb
from pydantic import BaseModel, ConfigDict, Field

from backend.storage.processes import running
from backend.storage.sessions import InvalidSession, SessionKey
from backend.storage.snapshots import open_kept
from backend.storage.workspaces import NotARegularFile, UnsafePath, Workspaces

TABLES_FOLDER = "outputs/.tables"  # the sandbox's shown_tables.TABLES_FOLDER
MAX_PAGE = 500
SPILL_FOLDER = Path("tmp") / "duckdb"  # under DATA_DIR: where the engine may spill
HEAVY_TABLE_BYTES = 8 * 1024**2  # a bigger table's queries run in the heavy lane
MAX_CELL_CHARS = 1_000
_TIE = "file_row_number"  # DuckDB's row number in the file: a stable order under any sort

FilterOp = Literal["eq", "ne", "contains", "gt", "ge", "lt", "le"]
_COMPARISONS = {"eq": "=", "ne": "<>", "gt": ">", "ge": ">=", "lt": "<", "le": "<="}


class TableNotFound(Exception):
    """No such table in the session (a bad id, a deleted session, a file that is not one)."""


class BadTableQuery(ValueError):
    """A sort or filter the table cannot take (an unknown column, a value of the wrong type)."""


class TableUnreadable(Exception):
    """The table's file is not a table DuckDB can read (not Parquet, or damaged)."""


class TableBusy(Exception):
    """DuckDB ran out of memory or spill room: other queries hold it, or this one is too big."""


logger = logging.getLogger(__name__)


@contextlib.contextmanager
def duckdb_errors() -> Iterator[None]:
    """DuckDB's errors as this module's: a bad query, a file it cannot read, no room."""
    try:
        yield
    except (duckdb.ConversionException, duckdb.BinderException) as exc:
        raise BadTableQuery(_first_line(exc)) from None
    except duckdb.InterruptException:
        raise  # the caller stopped it (its time was up)
    except duckdb.OutOfMemoryException as exc:
        logger.warning("A table query ran out of memory or spill room: %s", _first_line(exc))
        raise TableBusy() from None
    except duckdb.Error as exc:
        logger.info("A table file DuckDB cannot read: %s", _first_line(exc))
        raise TableUnreadable() from None


class ColumnFilter(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    column: str = Field(max_length=1_000)
    op: FilterOp
    value: str | int | float | bool = Field(union_mode="left_to_right")


class TableQuery(BaseModel):
    """Which rows, in which order: `sort` names a column (`descending` flips it)."""

    model_config = ConfigDict(frozen=True)

    sort: str | None = None
    descending: bool = False
    filters: list[ColumnFilter] = Field(default_factory=list, max_length=20)


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # DuckDB's SQL type


@dataclass(frozen=True)
class TablePage:
    total: int  # rows that pass the filters
    offset: int
    columns: list[Column]
    rows: list[list[Any]]


class TableEngine:
    """The process's DuckDB for table queries, bounded in memory, threads and spill."""

    def __init__(self, memory_mb: int, threads: int, spill: Path | None, spill_mb: int) -> None:
        config: dict[str, str | bool | int | float | list[str]] = {
            "memory_limit": f"{memory_mb}MB",
            "threads": threads,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            # Each query reads its own /proc/self/fd/N: a cache of file blocks by path would
            # only grow. Freed memory goes back to the system soon, not at 128 MB.
            "enable_external_file_cache": False,
            "allocator_flush_threshold": "16MB",
            "allocator_bulk_deallocation_flush_threshold": "16MB",
            # Left alone, DuckDB spills to `.tmp` in the server's current folder, up to 90%
            # of that disk's free space, and leaves it there.
            "temp_directory": str(_fresh(spill)) if spill is not None and spill_mb else "",
            "max_temp_directory_size": f"{spill_mb}MB",
        }
        self.database = duckdb.connect(config=config)
        self.database.execute("SET lock_configuration = true")

    @contextlib.contextmanager
    def cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A connection of its own (its `interrupt` stops only its query); closed after."""
        cursor = self.database.cursor()
        try:
            yield cursor
        finally:
            cursor.close()


def _fresh(spill: Path) -> Path:
    """This process's spill folder, under `spill`, emptied of earlier processes' leftovers."""
    spill.mkdir(parents=True, exist_ok=True)
    for old in spill.iterdir():
        if old.name.isdigit() and not running(int(old.name)):
            shutil.rmtree(old, ignore_errors=True)
    mine = spill / str(os.getpid())
    shutil.rmtree(mine, ignore_errors=True)
    mine.mkdir(mode=0o700)
    return mine


_engines: dict[tuple[int, int, Path | None, int], TableEngine] = {}
_engines_lock = threading.Lock()


def engine(
    memory_mb: int, threads: int, spill: Path | None = None, spill_mb: int = 0
) -> TableEngine:
    """The process's engine for these bounds; `spill` (a folder) is where it may spill."""
    with _engines_lock:
        key = (memory_mb, threads, spill, spill_mb)
        if key not in _engines:
            _engines[key] = TableEngine(memory_mb, threads, spill, spill_mb)
        return _engines[key]


def close_engines() -> None:
    """Close the process's DuckDB databases (at shutdown; a later query opens a new one).

    Left to the interpreter's exit, a connection outlives it (a module's globals are not
    always cleared then), and nanobind reports it and DuckDB's types as leaked.
    """
    with _engines_lock:
        engines = list(_engines.values())
        _engines.clear()
    for each in engines:
        each.database.close()


def table_path(table_id: str) -> str:
    """The workspace path of table `table_id`; TableNotFound for anything but a table id."""
    run, _, number = table_id.partition("_")
    if not (len(run) == 12 and all(c in "0123456789abcdef" for c in run)):
        raise TableNotFound(table_id)
    if len(number) != 1 or number not in "123456789":
        raise TableNotFound(table_id)
    return f"{TABLES_FOLDER}/{table_id}.parquet"


@contextlib.contextmanager
def opened_table(
    workspaces: Workspaces, session_key: SessionKey, table_id: str
) -> Iterator[BinaryIO]:
    """The table's Parquet, opened without following links; TableNotFound if it is not there."""
    try:
        handle = open_kept(workspaces, session_key, table_path(table_id))  # or another branch's
    except (FileNotFoundError, NotADirectoryError, NotARegularFile, UnsafePath, InvalidSession):
        raise TableNotFound(table_id) from None
    with handle:
        yield handle


def table_bytes(workspaces: Workspaces, session_key: SessionKey, table_id: str) -> int:
    """The size of the table's Parquet file (TableNotFound if there is none)."""
    with opened_table(workspaces, session_key, table_id) as handle:
        return os.fstat(handle.fileno()).st_size


def source(handle: BinaryIO) -> str:
    """What DuckDB reads: the open file itself, whatever its path now holds."""
    return f"/proc/self/fd/{handle.fileno()}"


class _Layouts:
    """Each table file's columns and row count, kept: a table's file never changes, and
    reading its footer again would be most of a small page's time."""

    def __init__(self, size: int = 1_024) -> None:
        self.size = size
        self.kept: OrderedDict[tuple[int, ...], tuple[list[Column], int]] = OrderedDict()
        self.lock = threading.Lock()

    def __call__(self, cursor: duckdb.DuckDBPyConnection, path: str) -> tuple[list[Column], int]:
        info = os.stat(path)  # /proc/self/fd/N: the open file itself
        key = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)
        with self.lock:
            if key in self.kept:
                self.kept.move_to_end(key)
                return self.kept[key]
        described = cursor.execute("DESCRIBE SELECT * FROM read_parquet(?)", [path]).fetchall()
        counted = "SELECT sum(num_rows) FROM parquet_file_metadata(?)"
        rows = int(cursor.execute(counted, [path]).fetchall()[0][0] or 0)
        layout = ([Column(str(row[0]), str(row[1])) for row in described], rows)
        with self.lock:
            self.kept[key] = layout
            while len(self.kept) > self.size:
                self.kept.popitem(last=False)
        return layout


layout = _Layouts()


def columns_of(cursor: duckdb.DuckDBPyConnection, path: str) -> list[Column]:
    return layout(cursor, path)[0]


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class Selection:
    where: str  # with its `parameters`
    parameters: list[Any]
    order: str
    row_numbers: bool  # whether `order` reads the row number (a stable tie-break)


def selection(query: TableQuery, columns: list[Column]) -> Selection:
    """The WHERE and ORDER BY of `query`, checked against the table's columns."""
    types = {c.name: c.type for c in columns}
    conditions, parameters = [], []
    for item in query.filters:
        if item.column not in types:
            raise BadTableQuery(f"There is no column {item.column!r} to filter.")
        column = quoted(item.column)
        if item.op == "contains":
            conditions.append(f"contains(lower(CAST({column} AS VARCHAR)), lower(?))")
        else:
            conditions.append(f"{column} {_COMPARISONS[item.op]} CAST(? AS {types[item.column]})")
        parameters.append(str(item.value).lower() if isinstance(item.value, bool) else item.value)
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    if query.sort is None:
        return Selection(where, parameters, "", False)
    if query.sort not in types:
        raise BadTableQuery(f"There is no column {query.sort!r} to sort by.")
    direction = "DESC" if query.descending else "ASC"
    tie = _TIE not in types
    order = f" ORDER BY {quoted(query.sort)} {direction} NULLS LAST" + (f", {_TIE}" if tie else "")
    return Selection(where, parameters, order, tie)


def scan(row_numbers: bool) -> str:
    """The table's rows (its `read_parquet(?)` takes the path)."""
    if row_numbers:
        return f"SELECT * EXCLUDE ({_TIE}) FROM read_parquet(?, {_TIE} = true)"
    return "SELECT * FROM read_parquet(?)"


def read_page(
    cursor: duckdb.DuckDBPyConnection,
    workspaces: Workspaces,
    session_key: SessionKey,
    table_id: str,
    query: TableQuery,
    offset: int,
    limit: int,
) -> TablePage:
    """Rows offset..offset+limit of the table, filtered and sorted as `query` says."""
    with opened_table(workspaces, session_key, table_id) as handle, duckdb_errors():
        path = source(handle)
        columns = columns_of(cursor, path)
        chosen = selection(query, columns)
        sql = f"{scan(chosen.row_numbers)}{chosen.where}{chosen.order} LIMIT ? OFFSET ?"
        rows = cursor.execute(sql, [path, *chosen.parameters, limit, offset]).fetchall()
        if chosen.where:
            counted = f"SELECT count(*) FROM read_parquet(?){chosen.where}"
            total = int(cursor.execute(counted, [path, *chosen.parameters]).fetchall()[0][0])
        else:
            total = row_count(cursor, path)
    return TablePage(total, offset, columns, [[json_safe(v) for v in row] for row in rows])


def row_count(cursor: duckdb.DuckDBPyConnection, path: str) -> int:
    """From the Parquet's footer: nothing is scanned."""
    return layout(cursor, path)[1]


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:300]


def json_safe(value: Any) -> Any:
    """A cell as JSON: numbers JavaScript reads exactly, text for everything else."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**53 else str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, decimal.Decimal | datetime.timedelta):
        value = str(value)
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def file_identity(handle: BinaryIO) -> tuple[int, int, int]:
    """What a table's file is: a table never changes, so its summary can be kept."""
    info = os.fstat(handle.fileno())
    return info.st_dev, info.st_ino, info.st_mtime_ns
