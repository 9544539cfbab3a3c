"""Parquet and Feather (Arrow IPC): schema and row count from the metadata.

Parquet keeps both in its footer. An Arrow IPC file keeps the schema in its
footer but each batch's row count in that batch's own header, so
`_feather_rows` reads the footer's block list and then only the few hundred
bytes of each batch header (a minimal FlatBuffers walk), never the data. Sample
rows are read only when the first row group or file is small.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.ipc as ipc  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

from backend.files.cells import jsonable
from backend.files.model import FileMetadata, Source

MAX_COLUMNS = 200
SAMPLE_ROWS = 5
SAMPLE_COLUMNS = 50
MAX_SAMPLE_BYTES = 64 * 1024 * 1024
MAX_FOOTER_BYTES = 64 * 1024 * 1024
MAX_BATCHES = 100_000
_IPC_MAGIC = b"ARROW1"
_RECORD_BATCH = 3  # MessageHeader union tag in Arrow's Message.fbs
_CONTINUATION = b"\xff\xff\xff\xff"


def _columns(schema: Any) -> list[dict[str, str]]:
    return [{"name": field.name, "dtype": str(field.type)} for field in schema][:MAX_COLUMNS]


def _sample(table: Any) -> list[list[Any]]:
    names = table.column_names[:SAMPLE_COLUMNS]
    records = table.select(names).slice(0, SAMPLE_ROWS).to_pylist()
    return [[jsonable(record[name]) for name in names] for record in records]


def _table(source: Source, fmt: str, schema: Any, rows: int | None, **extra: Any) -> FileMetadata:
    columns = _columns(schema)
    shown = f"{rows:,} rows" if rows is not None else "rows unknown"
    return source.describe(
        "tabular",
        f"{fmt} table, {len(schema)} columns, {shown}",
        {
            "columns": columns,
            "column_count": len(schema),
            "rows": rows,
            "rows_estimated": False,
            **extra,
        },
    )


def describe_parquet(source: Source) -> FileMetadata:
    source.handle.seek(0)
    parquet = pq.ParquetFile(source.handle)
    meta = parquet.metadata
    sample: list[list[Any]] = []
    if meta.num_row_groups and meta.num_columns <= SAMPLE_COLUMNS * 20:
        # Decode a few rows only: a row group's stated size is its *encoded* size, and
        # run-length pages can promise little and unpack to gigabytes.
        names = parquet.schema_arrow.names[:SAMPLE_COLUMNS]
        batches = parquet.iter_batches(batch_size=SAMPLE_ROWS, columns=names)
        first = next(iter(batches), None)
        if first is not None:
            sample = _sample(pa.Table.from_batches([first]))
    return _table(
        source,
        "Parquet",
        parquet.schema_arrow,
        meta.num_rows,
        row_groups=meta.num_row_groups,
        sample_rows=sample,
    )


class _Flat:
    """Just enough of a FlatBuffers reader for Arrow's Footer and Message tables."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def u32(self, position: int) -> int:
        value: int = struct.unpack_from("<I", self.data, position)[0]
        return value

    def root(self) -> int:
        return self.u32(0)

    def field(self, table: int, index: int) -> int | None:
        """The position of a table's field, or None when it is absent (default)."""
        vtable = table - struct.unpack_from("<i", self.data, table)[0]
        vtable_size, _ = struct.unpack_from("<HH", self.data, vtable)
        slot = 4 + 2 * index
        if slot >= vtable_size:
            return None
        offset: int = struct.unpack_from("<H", self.data, vtable + slot)[0]
        return table + offset if offset else None

    def indirect(self, position: int) -> int:
        return position + self.u32(position)


def _batch_rows(source: Source, offset: int, length: int) -> int:
    """The row count in one record batch's header (Message.header.length)."""
    raw = source.read_at(offset, length)
    start = 8 if raw.startswith(_CONTINUATION) else 4
    message = _Flat(raw[start:])
    root = message.root()
    kind = message.field(root, 1)
    header = message.field(root, 2)
    if kind is None or message.data[kind] != _RECORD_BATCH or header is None:
        raise ValueError("an Arrow record batch block holds no record batch")
    batch = message.indirect(header)
    length_at = message.field(batch, 0)
    rows: int = struct.unpack_from("<q", message.data, length_at)[0] if length_at else 0
    return rows


def _feather_rows(source: Source) -> int:
    tail = source.read_at(source.size - 10, 10)
    if tail[4:] != _IPC_MAGIC:
        raise ValueError("not an Arrow IPC file")
    footer_length = struct.unpack_from("<i", tail)[0]
    if not 0 < footer_length <= min(MAX_FOOTER_BYTES, source.size):
        raise ValueError("the Arrow footer is damaged")
    footer = _Flat(source.read_at(source.size - 10 - footer_length, footer_length))
    batches = footer.field(footer.root(), 3)  # Footer.recordBatches
    if batches is None:
        return 0
    vector = footer.indirect(batches)
    count = footer.u32(vector)
    if count > MAX_BATCHES:
        raise ValueError(f"{count:,} record batches")
    total = 0
    for index in range(count):
        offset, meta_length = struct.unpack_from("<qi", footer.data, vector + 4 + 24 * index)
        total += _batch_rows(source, offset, meta_length)
    return total


def describe_feather(source: Source) -> FileMetadata:
    if source.read_at(0, 4) == b"FEA1":
        raise ValueError("legacy Feather v1 file; convert it to Feather v2 (Arrow IPC)")
    source.handle.seek(0)
    reader = ipc.open_file(pa.PythonFile(source.handle, mode="r"))
    extra: dict[str, Any] = {"record_batches": reader.num_record_batches}
    try:
        rows: int | None = _feather_rows(source)
    except (ValueError, struct.error, IndexError):
        rows = None
    # No sample rows: reading a batch decodes all of it, and a compressed 25 KB file
    # can unpack to gigabytes. The schema and the row count come from the headers.
    return _table(source, "Feather", reader.schema, rows, **extra)
