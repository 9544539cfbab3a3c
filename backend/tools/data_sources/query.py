"""What every data source reader shares: where a source is, the bounds of one query,
and the copy of its answer, as an Arrow IPC stream, cut at those bounds."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pyarrow as pa  # type: ignore[import-untyped]

from backend.storage.data_sources import SourceKind

NETWORK_KINDS: tuple[SourceKind, ...] = ("postgresql", "mysql")
FILE_KINDS: tuple[SourceKind, ...] = ("sqlite", "duckdb", "dataset")


@dataclass(frozen=True)
class SourceAddress:
    kind: SourceKind
    host: str = ""
    port: int = 0
    database: str = ""
    username: str = ""
    password: str = ""
    path: Path | None = None  # a file source's database file, kept by the server

    def __repr__(self) -> str:  # never the password, in a log or a traceback
        return f"SourceAddress({self.kind}, {self.host}:{self.port}/{self.database})"


@dataclass(frozen=True)
class QueryLimits:
    seconds: float  # the database stops the statement past this
    max_rows: int
    max_bytes: int  # of the answer, as Arrow holds it


class QueryFailed(Exception):
    """The database refused the query or failed; the message is the database's, safe to
    show. `missing`: the table or column it did not know, if that was the failure."""

    def __init__(self, message: str, missing: str = "", missing_in: str = "") -> None:
        super().__init__(message)
        self.missing = missing
        self.missing_in = missing_in  # the table a missing column was looked for in


class AccountRefused(Exception):
    """The account may do more than read (a superuser, a file or program role, a write
    privilege): the message says what, and that a read-only role is needed."""


class Rows(Protocol):
    """A query's answer as it arrives: its schema, then its batches."""

    schema: pa.Schema

    def __iter__(self) -> Iterator[pa.RecordBatch]: ...


@dataclass(frozen=True)
class QueryAnswer:
    columns: list[str]
    rows: int
    bytes: int
    truncated: bool  # cut at the row or byte bound


class Sink(Protocol):
    def write(self, data: bytes, /) -> object: ...


def _float_decimals(schema: pa.Schema) -> pa.Schema:
    """DECIMAL/NUMERIC as float64, from every source alike: pandas holds decimals as
    Python objects, which arithmetic with floats (`df.amount * 1.1`) refuses."""
    return pa.schema(
        [pa.field(f.name, pa.float64()) if pa.types.is_decimal(f.type) else f for f in schema]
    )


def copy_capped(rows: Rows, limits: QueryLimits, sink: Sink) -> QueryAnswer:
    """Write `rows` to `sink` as an Arrow IPC stream, stopping at `limits`' rows or bytes."""
    count = size = 0
    truncated = False
    schema = _float_decimals(rows.schema)
    with pa.ipc.new_stream(sink, schema) as writer:
        for batch in rows:
            if schema != batch.schema:
                batch = batch.cast(schema)
            room = limits.max_rows - count
            if batch.num_rows > room:
                batch, truncated = batch.slice(0, room), True
            if size + batch.nbytes > limits.max_bytes and batch.num_rows:
                share = (limits.max_bytes - size) / max(batch.nbytes, 1)
                batch, truncated = batch.slice(0, max(int(batch.num_rows * share), 0)), True
            writer.write_batch(batch)
            count += batch.num_rows
            size += batch.nbytes
            if truncated:
                break
    return QueryAnswer(list(schema.names), count, size, truncated)
