"""Delimited tables (CSV, TSV, and .txt/.dat that look like one), from a sample.

Only the first `SAMPLE_BYTES` are read: the delimiter is sniffed from the first
lines, pandas infers the dtypes from the sample, and the row count of a larger
file is the file size divided by the sample's bytes per row, reported as an
estimate. A 2 GB CSV is described in milliseconds.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pandas as pd

from backend.files.cells import jsonable
from backend.files.model import FileMetadata, Source, estimate_count
from backend.files.text import TextSample, read_sample

WHITESPACE = r"\s+"
DELIMITERS = (",", "\t", ";", "|")
DEFAULT_DELIMITER = {"csv": ",", "tsv": "\t"}
SNIFF_LINES = 50
MIN_CONSISTENCY = 0.8
MAX_COLUMNS = 200
SAMPLE_ROWS = 5
_NAMES = {",": "comma", "\t": "tab", ";": "semicolon", "|": "pipe", WHITESPACE: "whitespace"}


@dataclass(frozen=True)
class Dialect:
    delimiter: str
    header: bool


def _first_lines(sample: TextSample) -> list[str]:
    lines = sample.text[: 256 * 1024].splitlines()
    return [line for line in lines if line.strip()][:SNIFF_LINES]


def _modal_width(widths: list[int]) -> tuple[float, int]:
    """How consistent the field counts are, and the usual count."""
    width, seen = Counter(widths).most_common(1)[0]
    return seen / len(widths), width


def _best_delimiter(lines: list[str], preferred: str) -> str | None:
    """The delimiter giving the most consistent field count (at least two fields)."""
    best: tuple[float, int, str] | None = None
    for delimiter in sorted(DELIMITERS, key=lambda d: d != preferred) if lines else ():
        widths = [len(row) for row in csv.reader(lines, delimiter=delimiter)]
        consistency, width = _modal_width(widths)
        usable = width >= 2 and consistency >= MIN_CONSISTENCY
        if usable and (best is None or (consistency, width) > best[:2]):
            best = (consistency, width, delimiter)
    return best[2] if best else None


def _reads_like_a_row(fields: list[str]) -> bool:
    """A .txt/.dat line is a table row if its fields are short and none is empty.

    Prose with a comma per line is as regular as a two-column table; this tells
    "Dear team," from "id,name".
    """
    return all(field.strip() and len(field.split()) <= 3 for field in fields)


def _whitespace_table(lines: list[str]) -> bool:
    consistency, width = _modal_width([len(line.split()) for line in lines])
    return width >= 2 and consistency >= 0.95


def _has_header(first: list[str]) -> bool:
    """A .dat/.txt whose first row is all numbers has no header."""
    try:
        [float(field) for field in first]
    except ValueError:
        return True
    return False


def sniff(sample: TextSample, extension: str) -> Dialect | None:
    """The delimiter and header of a table, or None when the text is not one.

    A .csv/.tsv is always a table with a header; a .txt/.dat must look like one.
    """
    lines = _first_lines(sample)
    default = DEFAULT_DELIMITER.get(extension)
    if default is not None:
        return Dialect(_best_delimiter(lines, default) or default, True)
    if len(lines) < 2:
        return None
    delimiter = _best_delimiter(lines, ",")
    if delimiter is not None and not _reads_like_a_row(lines[0].split(delimiter)):
        delimiter = None
    if delimiter is None and _whitespace_table(lines):
        delimiter = WHITESPACE
    if delimiter is None:
        return None
    first = lines[0].split() if delimiter == WHITESPACE else lines[0].split(delimiter)
    return Dialect(delimiter, _has_header(first))


def read_options(dialect: Dialect, encoding: str) -> dict[str, Any]:
    """Keyword arguments for `pandas.read_csv` (shared with the loader code)."""
    options: dict[str, Any] = {"sep": dialect.delimiter}
    if not dialect.header:
        options["header"] = None
    if encoding != "utf-8":
        options["encoding"] = encoding
    return options


def _parse(sample: TextSample, dialect: Dialect) -> tuple[pd.DataFrame, str]:
    """The sample as a frame, and the text parsed; a cut inside a quoted field is dropped."""
    text = sample.text
    while True:
        try:
            frame = pd.read_csv(
                io.StringIO(text),
                sep=dialect.delimiter,
                header=0 if dialect.header else None,
                low_memory=False,
            )
            return frame, text
        except pd.errors.ParserError:
            cut = text.rfind("\n", 0, len(text) // 2)
            if sample.complete or cut <= 0:
                raise
            text = text[: cut + 1]


def describe_table(source: Source, sample: TextSample, dialect: Dialect) -> FileMetadata:
    frame, parsed = _parse(sample, dialect)
    parsed_bytes = len(parsed.encode(sample.encoding, errors="replace"))
    if sample.complete:
        rows, estimated = len(frame), False
    else:
        records = len(frame) + (1 if dialect.header else 0)
        total = estimate_count(source.size, min(parsed_bytes, sample.byte_count), records)
        rows, estimated = max(total - (1 if dialect.header else 0), len(frame)), True
    columns = [
        {"name": str(name), "dtype": str(dtype)}
        for name, dtype in list(frame.dtypes.items())[:MAX_COLUMNS]
    ]
    approx = "~" if estimated else ""
    note = " (estimated from a sample)" if estimated else ""
    return source.describe(
        "tabular",
        f"{source.extension.upper()} table, {frame.shape[1]} columns, {approx}{rows:,} rows{note}",
        {
            "columns": columns,
            "column_count": frame.shape[1],
            "rows": rows,
            "rows_estimated": estimated,
            "sample_rows": [
                [jsonable(value) for value in row[:MAX_COLUMNS]]
                for row in frame.head(SAMPLE_ROWS).itertuples(index=False)
            ],
            "delimiter": dialect.delimiter,
            "delimiter_name": _NAMES[dialect.delimiter],
            "header": dialect.header,
            "encoding": sample.encoding,
            "read_options": read_options(dialect, sample.encoding),
        },
    )


def describe_delimited(source: Source) -> FileMetadata | None:
    """The table's metadata, or None when the text does not look delimited."""
    sample = read_sample(source)
    dialect = sniff(sample, source.extension)
    if dialect is None:
        return None
    return describe_table(source, sample, dialect)
