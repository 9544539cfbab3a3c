"""PostgreSQL sources, read into Arrow by ADBC's libpq driver (binary COPY, no Python
per row).

Every query runs in its own transaction, begun READ ONLY with the statement timeout set
for it alone, and rolled back: the database itself refuses a write or DDL, and a setting
the query changed ends with it. The driver prepares the query first, so PostgreSQL
refuses a second statement in it. What a read-only transaction still allows (reading
server files, running programs) needs a superuser or a `pg_*_server_*` role, which
`check_account` refuses: the docs ask for a role that may only read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import adbc_driver_postgresql.dbapi as adbc
import pyarrow as pa  # type: ignore[import-untyped]

from backend.files.databases import MAX_SAMPLES
from backend.tools.data_sources.catalog import Catalog, Column, Table, with_samples
from backend.tools.data_sources.query import (
    AccountRefused,
    QueryFailed,
    QueryLimits,
    SourceAddress,
)

CONNECT_TIMEOUT = 10
_DEFAULT_SCHEMA = "public"
_POWERFUL_ROLES = ("pg_read_server_files", "pg_write_server_files", "pg_execute_server_program")
_MISSING = re.compile(r'(relation|column) "([^"]+)" does not exist')
_CATALOG_SCHEMAS = "('pg_catalog', 'information_schema', 'pg_toast')"


def _url(address: SourceAddress) -> str:
    user = quote(address.username, safe="")
    password = quote(address.password, safe="")
    credentials = f"{user}:{password}@" if password else f"{user}@"
    host = f"[{address.host}]" if ":" in address.host else address.host
    database = quote(address.database, safe="")
    return (
        f"postgresql://{credentials}{host}:{address.port or 5432}/{database}"
        f"?connect_timeout={CONNECT_TIMEOUT}&application_name=python-data-agent"
    )


def _message(error: Exception) -> str:
    """The database's own words, without the driver's framing."""
    text = str(error)
    if "ERROR:" in text:
        text = text.split("ERROR:", 1)[1]
    return text.split("Query was:", 1)[0].split("SQLSTATE", 1)[0].strip()


def _plain_type(kind: pa.DataType) -> pa.DataType:
    """The driver's types without its extensions: NUMERIC (text, to keep every digit) as
    float64, what pandas computes with; other PostgreSQL types it has no Arrow type for
    (as "opaque" text) as their text."""
    if isinstance(kind, pa.BaseExtensionType):
        if getattr(kind, "type_name", "") == "numeric":
            return pa.float64()
        return kind.storage_type
    return kind


class _Answer:
    def __init__(self, reader: pa.RecordBatchReader) -> None:
        self.reader = reader
        fields = [pa.field(f.name, _plain_type(f.type)) for f in reader.schema]
        self.schema = pa.schema(fields)
        self.plain = all(f.type == p.type for f, p in zip(reader.schema, fields, strict=True))

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        try:
            for batch in self.reader:
                yield batch if self.plain else self._converted(batch)
        except Exception as exc:  # stopped midway: the statement timeout, a lost connection
            raise _failed(exc) from None

    def _converted(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        columns = []
        for column, field in zip(batch.columns, self.schema, strict=True):
            if isinstance(column.type, pa.BaseExtensionType):
                column = column.storage
            columns.append(column if column.type == field.type else column.cast(field.type))
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


class PostgresSource:
    """One connection to a PostgreSQL source; one query at a time."""

    def __init__(self, address: SourceAddress) -> None:
        try:
            self.connection = adbc.connect(_url(address))
        except Exception as exc:
            raise QueryFailed(f"cannot connect: {_message(exc)}") from None
        self.cursor = self.connection.cursor()

    def _begin(self, seconds: float) -> None:
        self.cursor.execute("SET TRANSACTION READ ONLY")
        self.cursor.execute(f"SET LOCAL statement_timeout = {max(int(seconds * 1000), 1)}")

    def query(self, sql: str, limits: QueryLimits) -> _Answer:
        """The query's rows as they arrive; `end()` once they have been read."""
        try:
            self._begin(limits.seconds)
            # A trailing line comment would swallow the driver's closing parenthesis.
            self.cursor.execute(sql.rstrip().rstrip(";") + "\n")
            if not self.cursor.description:
                raise QueryFailed("the statement returned no rows: only queries are run here")
            return _Answer(self.cursor.fetch_record_batch())
        except QueryFailed:
            self.end()
            raise
        except Exception as exc:
            self.end()
            raise _failed(exc) from None

    def end(self) -> None:
        """Roll the query's transaction back."""
        try:
            self.connection.rollback()
        except Exception:  # a broken connection: the pool drops it (`healthy`)
            self.broken = True

    broken = False

    def cancel(self) -> None:
        """From another thread: stop the running query."""
        try:
            self.cursor.adbc_cancel()
        except Exception:
            self.broken = True

    def rows(self, sql: str, seconds: float = 30) -> list[dict[str, Any]]:
        try:
            answer = self.query(sql, QueryLimits(seconds, 1_000_000, 1 << 30))
            found: list[dict[str, Any]] = answer.reader.read_all().to_pylist()
            return found
        finally:
            self.end()

    def check_account(self) -> None:
        """Refuse an account that can do more than read."""
        row = self.rows(
            "SELECT r.rolsuper AS superuser, ARRAY(SELECT g.rolname FROM pg_roles g"
            " WHERE pg_has_role(current_user, g.oid, 'USAGE') AND g.rolname IN"
            f" ({', '.join(repr(r) for r in _POWERFUL_ROLES)})) AS powers"
            " FROM pg_roles r WHERE r.rolname = current_user"
        )[0]
        if row["superuser"]:
            raise AccountRefused(
                "this account is a superuser, which can read server files and run programs:"
                " give a role that may only read (docs/data-sources.md)"
            )
        if row["powers"]:
            raise AccountRefused(
                f"this account has {', '.join(row['powers'])}: give a role that may only"
                " read (docs/data-sources.md)"
            )

    def catalog(self, max_tables: int) -> Catalog:
        tables = self.rows(
            "SELECT n.nspname AS schema, c.relname AS name, c.relkind AS kind,"
            " c.reltuples::bigint AS rows FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            f" WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname NOT IN {_CATALOG_SCHEMAS}"
            " AND n.nspname NOT LIKE 'pg_temp%' AND has_table_privilege(c.oid, 'SELECT')"
            f" ORDER BY n.nspname <> '{_DEFAULT_SCHEMA}', n.nspname, c.relname LIMIT {max_tables}"
        )
        columns = self.rows(
            "SELECT table_schema AS schema, table_name AS name, column_name AS column,"
            " data_type AS type FROM information_schema.columns"
            f" WHERE table_schema NOT IN {_CATALOG_SCHEMAS}"
            " ORDER BY table_schema, table_name, ordinal_position"
        )
        keys = self.rows(
            "SELECT n.nspname AS schema, c.relname AS name, con.contype AS kind,"
            " a.attname AS column, fn.nspname AS ref_schema, fc.relname AS ref_table,"
            " fa.attname AS ref_column FROM pg_constraint con"
            " JOIN pg_class c ON c.oid = con.conrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " CROSS JOIN LATERAL unnest(con.conkey, con.confkey) AS k(attnum, fattnum)"
            " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum"
            " LEFT JOIN pg_class fc ON fc.oid = con.confrelid"
            " LEFT JOIN pg_namespace fn ON fn.oid = fc.relnamespace"
            " LEFT JOIN pg_attribute fa ON fa.attrelid = con.confrelid AND fa.attnum = k.fattnum"
            f" WHERE con.contype IN ('p', 'f') AND n.nspname NOT IN {_CATALOG_SCHEMAS}"
        )
        by_table: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for column in columns:
            by_table.setdefault((column["schema"], column["name"]), []).append(column)
        key_of = {(k["schema"], k["name"], k["column"]): k for k in keys}
        found = []
        for table in tables:
            place = (table["schema"], table["name"])
            name = _qualified(*place)
            cols = []
            for column in by_table.get(place, []):
                key = key_of.get((*place, column["column"]))
                cols.append(
                    Column(
                        name=column["column"],
                        type=column["type"],
                        key="primary" if key and key["kind"] == "p" else "",
                        references=f"{_qualified(key['ref_schema'], key['ref_table'])}."
                        f"{key['ref_column']}"
                        if key and key["kind"] == "f"
                        else "",
                    )
                )
            kind = "view" if table["kind"] in ("v", "m") else "table"
            rows = table["rows"] if table["rows"] is not None and table["rows"] >= 0 else None
            found.append(Table(name=name, columns=cols, rows=rows, kind=kind))  # -1: never analysed
        return Catalog(tables=found)

    def samples(self, table: Table, seconds: float) -> Table:
        """`table` with a few values of each column."""
        quoted = ".".join(_quote(part) for part in _parts(table.name))
        return with_samples(
            table, self.rows(f"SELECT * FROM {quoted} LIMIT {MAX_SAMPLES}", seconds)
        )

    def close(self) -> None:
        try:
            self.cursor.close()
            self.connection.close()
        except Exception:
            self.broken = True


def _qualified(schema: str, table: str) -> str:
    return table if schema == _DEFAULT_SCHEMA else f"{schema}.{table}"


def _parts(name: str) -> list[str]:
    return name.split(".", 1) if "." in name else [name]


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _failed(exc: Exception) -> QueryFailed:
    message = _message(exc)
    missing = _MISSING.search(message)
    if missing is None:
        return QueryFailed(message)
    return QueryFailed(message, missing=missing.group(2))
