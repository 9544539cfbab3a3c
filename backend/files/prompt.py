"""The METADATA block that tells the model what data it has.

Each file gets a few lines (name, variable, kind, columns with dtypes, rows, a
couple of sample rows, or the gist of a non-tabular file), cut to
`PER_FILE_CHARS`, so twenty files still fit a small model's context.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from backend.files.model import FileMetadata, human_size

PER_FILE_CHARS = 400
MAX_COLUMNS_SHOWN = 15
SAMPLE_ROWS_SHOWN = 2
MAX_ROW_CHARS = 100
MAX_ITEMS_SHOWN = 8


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _columns(metadata: FileMetadata) -> str:
    columns = metadata.details.get("columns", [])
    shown = ", ".join(f"{c['name']} ({c['dtype']})" for c in columns[:MAX_COLUMNS_SHOWN])
    total = metadata.details.get("column_count", len(columns))
    more = f", … {total - MAX_COLUMNS_SHOWN} more" if total > MAX_COLUMNS_SHOWN else ""
    return f"columns: {shown}{more}"


def _row(values: list[Any]) -> str:
    cells = [value if isinstance(value, str) else json.dumps(value) for value in values]
    return _cut(" | ".join(cells), MAX_ROW_CHARS)


def _items(label: str, items: list[str]) -> str:
    more = ", …" if len(items) > MAX_ITEMS_SHOWN else ""
    return f"{label}: {', '.join(items[:MAX_ITEMS_SHOWN])}{more}"


def _gist(metadata: FileMetadata) -> list[str]:
    """The lines under a file's heading: what a model needs to write code for it."""
    details = metadata.details
    if metadata.error:
        return [f"error: {metadata.error}"]
    lines = [metadata.summary]
    if details.get("columns"):
        lines.append(_columns(metadata))
        sample = details.get("sample_rows", [])[:SAMPLE_ROWS_SHOWN]
        lines += [f"row: {_row(row)}" for row in sample]
    elif details.get("keys"):
        lines.append(_items("keys", [str(key) for key in details["keys"]]))
    elif details.get("datasets"):
        lines.append(
            _items(
                "datasets", [f"{d['name']} {d['shape']} {d['dtype']}" for d in details["datasets"]]
            )
        )
    elif details.get("variables"):
        lines.append(
            _items(
                "variables",
                [f"{v['name']} {v['shape']} {v['dtype']}" for v in details["variables"]],
            )
        )
    elif details.get("entries"):
        lines.append(_items("entries", [entry["name"] for entry in details["entries"]]))
    elif details.get("text"):
        lines.append(f"text: {_cut(details['text'], 150)}")
    elif details.get("first_lines"):
        lines += [f"line: {_cut(line, MAX_ROW_CHARS)}" for line in details["first_lines"][:2]]
    if details.get("source"):
        lines.append(f"copied from {details['source']}")
    conversion = details.get("conversion") or {}
    if details.get("parquet"):
        lines.append(f"Parquet copy: {details['parquet']} (read or query this path: much faster)")
    elif conversion.get("state") in ("queued", "converting"):
        lines.append(f"being converted to Parquet ({conversion.get('progress', 0):.0f}%)")
    if len(details.get("sheet_names", [])) > 1:
        lines.append(_items("sheets", details["sheet_names"]))
    return lines


LARGE_NOTE = (
    "Files marked LARGE do not fit in memory: never load them with pandas (no read_csv, no "
    ".df() of the whole table). Query them with DuckDB SQL and bring back only the small "
    'result, e.g. duckdb.sql("SELECT key, sum(amount) AS total FROM df1 GROUP BY key").df() '
    "where df1 is the file's DuckDB relation, or FROM 'uploads/name.csv' for its path."
)


def describe_file(metadata: FileMetadata, variable: str | None = None) -> str:
    relation = " (a DuckDB relation)" if metadata.large else ""
    loaded = f" -> {variable}{relation}" if variable else ""
    size = human_size(metadata.size) + (", LARGE" if metadata.large else "")
    heading = f"- {metadata.name}{loaded} [{metadata.kind}, {size}]"
    body = "\n".join(f"  {line}" for line in _gist(metadata))
    return _cut(f"{heading}\n{body}", PER_FILE_CHARS)


def describe_for_prompt(files: Sequence[FileMetadata], mapping: dict[str, str]) -> str:
    """The body of a prompt's METADATA section; `mapping` (path -> variable) names the frames."""
    if not files:
        return "(no data files)"
    blocks = [describe_file(metadata, mapping.get(metadata.name)) for metadata in files]
    note = (
        "Paths are relative to the working directory; `-> name` means the file is "
        "already loaded into that variable."
    )
    notes = [note, LARGE_NOTE] if any(metadata.large for metadata in files) else [note]
    return "\n".join([*notes, *blocks])
