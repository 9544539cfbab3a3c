"""MySQL and MariaDB sources, through PyMySQL.

Each query runs in a transaction begun READ ONLY, with the session's own access mode
read-only too (so a statement that commits implicitly, as DDL does, meets a read-only
session) and the server's statement time limit set for it, then rolled back. PyMySQL
never asks for multiple statements or for LOAD DATA LOCAL, so the server refuses both.
Reading and writing server files needs the FILE privilege, which `check_account`
refuses, with every other global privilege but reading.
"""

from __future__ import annotations

import contextlib
import decimal
import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pymysql
import pymysql.cursors
from pymysql.constants import FIELD_TYPE

from backend.files.databases import MAX_SAMPLES
from backend.tools.data_sources.catalog import Catalog, Column, Table, with_samples
from backend.tools.data_sources.query import (
    AccountRefused,
    QueryFailed,
    QueryLimits,
    SourceAddress,
)

CONNECT_TIMEOUT = 10
BATCH_ROWS = 10_000
_READ_PRIVILEGES = {"SELECT", "SHOW VIEW", "USAGE", "SHOW DATABASES"}
_MISSING_TABLE = re.compile(r"Table '(?:[^.']+\.)?([^']+)' doesn't exist")
_MISSING_COLUMN = re.compile(r"Unknown column '([^']+)' in '([^']+)'")
_INTEGERS = {
    FIELD_TYPE.TINY,
    FIELD_TYPE.SHORT,
    FIELD_TYPE.LONG,
    FIELD_TYPE.LONGLONG,
    FIELD_TYPE.INT24,
    FIELD_TYPE.YEAR,
}
_FLOATS = {FIELD_TYPE.FLOAT, FIELD_TYPE.DOUBLE, FIELD_TYPE.DECIMAL, FIELD_TYPE.NEWDECIMAL}


def _arrow_type(type_code: int) -> pa.DataType:
    """TEXT and BLOB share their type codes: both arrive as strings (bytes decoded)."""
    if type_code in _INTEGERS:
        return pa.int64()
    if type_code in _FLOATS:
        return pa.float64()  # DECIMAL too: what pandas users compute with
    if type_code in (FIELD_TYPE.DATE, FIELD_TYPE.NEWDATE):
        return pa.date32()
    if type_code in (FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP):
        return pa.timestamp("us")
    return pa.string()


def _value(value: Any, kind: pa.DataType) -> Any:
    if value is None:
        return None
    if isinstance(value, decimal.Decimal):
        return float(value)
    if kind == pa.string() and not isinstance(value, str):
        if isinstance(value, bytes):
            return value.decode("utf-8", "replace")
        return str(value)
    return value


class _Answer:
    def __init__(self, cursor: Any) -> None:
        self.cursor = cursor
        fields = [pa.field(column[0], _arrow_type(column[1])) for column in cursor.description]
        self.schema = pa.schema(_unique(fields))

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            yield from self._batches()
        except pymysql.MySQLError as exc:  # stopped midway: the time limit, a lost connection
            raise _failed(exc) from None

    def _batches(self) -> Iterator[pa.RecordBatch]:
        while rows := self.cursor.fetchmany(BATCH_ROWS):
            arrays = [
                pa.array([_value(row[i], field.type) for row in rows], type=field.type)
                for i, field in enumerate(self.schema)
            ]
            yield pa.RecordBatch.from_arrays(arrays, schema=self.schema)


def _unique(fields: list[pa.Field]) -> list[pa.Field]:
    """Columns named alike (`SELECT a.id, b.id`) made distinct, as pandas would need."""
    seen: dict[str, int] = {}
    named = []
    for field in fields:
        count = seen.get(field.name, 0)
        seen[field.name] = count + 1
        named.append(field.with_name(f"{field.name}_{count}") if count else field)
    return named


class MySqlSource:
    """One connection to a MySQL or MariaDB source; one query at a time."""

    broken = False

    def __init__(self, address: SourceAddress) -> None:
        try:
            self.connection = pymysql.connect(
                host=address.host,
                port=address.port or 3306,
                user=address.username,
                password=address.password,
                database=address.database or None,
                connect_timeout=CONNECT_TIMEOUT,
                autocommit=False,
                local_infile=False,
                charset="utf8mb4",
                cursorclass=pymysql.cursors.SSCursor,
            )
        except pymysql.MySQLError as exc:
            raise QueryFailed(f"cannot connect: {_message(exc)}") from None
        self.mariadb = "mariadb" in self.connection.get_server_info().lower()
        self.cursor: Any = None

    def _begin(self, seconds: float) -> Any:
        cursor = self.connection.cursor()
        if self.mariadb:
            cursor.execute(f"SET SESSION max_statement_time = {max(seconds, 0.001):.3f}")
        else:
            cursor.execute(f"SET SESSION max_execution_time = {max(int(seconds * 1000), 1)}")
        cursor.execute("SET SESSION TRANSACTION READ ONLY")
        cursor.execute("START TRANSACTION READ ONLY")
        return cursor

    def query(self, sql: str, limits: QueryLimits) -> _Answer:
        try:
            self.cursor = self._begin(limits.seconds)
            self.cursor.execute(sql)
            if not self.cursor.description:
                raise QueryFailed("the statement returned no rows: only queries are run here")
            return _Answer(self.cursor)
        except QueryFailed:
            self.end()
            raise
        except pymysql.MySQLError as exc:
            self.end()
            raise _failed(exc) from None

    def end(self) -> None:
        try:
            if self.cursor is not None:
                self.cursor.close()  # an unbuffered cursor reads what is left first
            self.connection.rollback()
        except Exception:
            self.broken = True
        self.cursor = None

    def cancel(self) -> None:
        """From another thread: the server's time limit stops the statement; closing
        the socket stops reading its rows."""
        self.broken = True
        with contextlib.suppress(Exception):
            self.connection.close()

    def rows(self, sql: str, seconds: float = 30) -> list[dict[str, Any]]:
        try:
            answer = self.query(sql, QueryLimits(seconds, 1_000_000, 1 << 30))
            names = answer.schema.names
            return [dict(zip(names, row, strict=True)) for row in answer.cursor.fetchall()]
        finally:
            self.end()

    def check_account(self) -> None:
        rows = self.rows(
            "SELECT PRIVILEGE_TYPE AS privilege FROM information_schema.USER_PRIVILEGES"
            " WHERE GRANTEE = CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''',"
            " SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')"
        )
        extra = sorted({row["privilege"] for row in rows} - _READ_PRIVILEGES)
        if extra:
            raise AccountRefused(
                f"this account holds {', '.join(extra)} on every database: give an account"
                " that may only read (docs/data-sources.md)"
            )

    def catalog(self, max_tables: int) -> Catalog:
        tables = self.rows(
            "SELECT TABLE_NAME AS name, TABLE_TYPE AS kind, TABLE_ROWS AS row_count"
            " FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE()"
            f" ORDER BY TABLE_NAME LIMIT {max_tables}"
        )
        columns = self.rows(
            "SELECT TABLE_NAME AS name, COLUMN_NAME AS col, COLUMN_TYPE AS type,"
            " COLUMN_KEY AS col_key FROM information_schema.COLUMNS"
            " WHERE TABLE_SCHEMA = DATABASE() ORDER BY TABLE_NAME, ORDINAL_POSITION"
        )
        references = self.rows(
            "SELECT TABLE_NAME AS name, COLUMN_NAME AS col, REFERENCED_TABLE_NAME AS ref_table,"
            " REFERENCED_COLUMN_NAME AS ref_column FROM information_schema.KEY_COLUMN_USAGE"
            " WHERE TABLE_SCHEMA = DATABASE() AND REFERENCED_TABLE_NAME IS NOT NULL"
        )
        refers = {(r["name"], r["col"]): f"{r['ref_table']}.{r['ref_column']}" for r in references}
        by_table: dict[str, list[Column]] = {}
        for column in columns:
            by_table.setdefault(column["name"], []).append(
                Column(
                    name=column["col"],
                    type=str(column["type"]),
                    key="primary" if column["col_key"] == "PRI" else "",
                    references=refers.get((column["name"], column["col"]), ""),
                )
            )
        return Catalog(
            tables=[
                Table(
                    name=table["name"],
                    columns=by_table.get(table["name"], []),
                    rows=None if table["row_count"] is None else int(table["row_count"]),
                    kind="view" if "VIEW" in str(table["kind"]) else "table",
                )
                for table in tables
            ]
        )

    def samples(self, table: Table, seconds: float) -> Table:
        quoted = "`" + table.name.replace("`", "``") + "`"
        return with_samples(
            table, self.rows(f"SELECT * FROM {quoted} LIMIT {MAX_SAMPLES}", seconds)
        )

    def close(self) -> None:
        try:
            self.connection.close()
        except Exception:
            self.broken = True


def _message(error: pymysql.MySQLError) -> str:
    args: tuple[object, ...] = tuple(getattr(error, "args", ()))
    return str(args[1]) if len(args) > 1 else str(error)


def _failed(exc: pymysql.MySQLError) -> QueryFailed:
    message = _message(exc)
    if table := _MISSING_TABLE.search(message):
        return QueryFailed(message, missing=table.group(1))
    if column := _MISSING_COLUMN.search(message):
        where = column.group(2)
        return QueryFailed(
            message,
            missing=column.group(1),
            missing_in=""
            if where
            in ("field list", "where clause", "order clause", "group statement", "on clause")
            else where,
        )
    return QueryFailed(message)
