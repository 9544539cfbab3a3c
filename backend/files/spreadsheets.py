"""Excel workbooks: sheet names, header rows, a few rows and the row counts.

xlsx/xlsm are zips, checked for zip bombs first, then streamed by openpyxl in
read-only mode, which stops parsing after the rows asked for; the row count
comes from the sheet's stored dimension. Legacy .xls is read with xlrd, which
needs the whole file in memory, so it is capped at `MAX_XLS_BYTES`.
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Iterable, Sequence
from typing import Any

import openpyxl  # type: ignore[import-untyped]
import xlrd  # type: ignore[import-untyped]

from backend.files.archive_checks import check_zip_container
from backend.files.cells import jsonable
from backend.files.model import FileMetadata, Source, human_size

MAX_SHEETS = 20
MAX_COLUMNS = 200
SAMPLE_ROWS = 5
MAX_XLS_BYTES = 64 * 1024 * 1024
_DTYPES: tuple[tuple[type, str], ...] = (
    (bool, "bool"),
    (int, "int64"),
    (float, "float64"),
    (datetime.datetime, "datetime64"),
    (datetime.date, "date"),
    (str, "str"),
)


def _dtype(values: Iterable[Any]) -> str:
    """A pandas-like dtype name from a column's sample cells."""
    found = set()
    for value in values:
        if value is None or value == "":
            continue
        found.add(next((name for kind, name in _DTYPES if isinstance(value, kind)), "object"))
    if found == {"int64", "float64"}:
        return "float64"
    return found.pop() if len(found) == 1 else ("object" if found else "unknown")


def _sheet(name: str, rows: list[Sequence[Any]], total: int | None) -> dict[str, Any]:
    """A sheet from its first rows (the header first) and its row count if known."""
    header = list(rows[0]) if rows else []
    while header and header[-1] in (None, ""):
        header.pop()
    header = header[:MAX_COLUMNS]
    sample = [list(row[: len(header)]) for row in rows[1:]]
    columns = [
        {
            "name": str(title) if title not in (None, "") else f"Unnamed: {index}",
            "dtype": _dtype(row[index] for row in sample if index < len(row)),
        }
        for index, title in enumerate(header)
    ]
    data_rows = None if total is None else max(total - 1, len(sample))
    return {
        "name": name,
        "columns": columns,
        "rows": data_rows,
        "sample_rows": [[jsonable(value) for value in row] for row in sample],
    }


def _workbook(
    source: Source, fmt: str, sheet_names: list[str], sheets: list[dict[str, Any]]
) -> FileMetadata:
    first = sheets[0] if sheets else {"columns": [], "rows": None, "sample_rows": []}
    shown = ", ".join(sheet_names[:5]) + (", …" if len(sheet_names) > 5 else "")
    rows = f"{first['rows']:,} rows" if first["rows"] is not None else "rows unknown"
    return source.describe(
        "tabular",
        f"{fmt} workbook, {len(sheet_names)} sheet(s) ({shown}); first sheet: "
        f"{len(first['columns'])} columns, {rows}",
        {
            "sheets": sheets,
            "sheet_names": sheet_names,
            "columns": first["columns"],
            "rows": first["rows"],
            "rows_estimated": False,
            "sample_rows": first["sample_rows"],
        },
    )


def describe_xlsx(source: Source) -> FileMetadata:
    check_zip_container(source.handle, source.name)
    book = openpyxl.load_workbook(source.handle, read_only=True, data_only=True)
    try:
        sheets = []
        for sheet in book.worksheets[:MAX_SHEETS]:
            rows = list(sheet.iter_rows(max_row=1 + SAMPLE_ROWS, values_only=True))
            sheets.append(_sheet(sheet.title, rows, sheet.max_row if rows else 0))
        names = list(book.sheetnames)
    finally:
        book.close()
    return _workbook(source, "Excel", names, sheets)


def describe_xls(source: Source) -> FileMetadata:
    if source.size > MAX_XLS_BYTES:
        raise ValueError(
            f"legacy .xls of {human_size(source.size)} is over the "
            f"{human_size(MAX_XLS_BYTES)} that can be inspected"
        )
    contents = source.read_at(0, MAX_XLS_BYTES)
    book = xlrd.open_workbook(file_contents=contents, on_demand=True, logfile=io.StringIO())
    try:
        sheets = []
        for index in range(min(book.nsheets, MAX_SHEETS)):
            sheet = book.sheet_by_index(index)
            rows = [sheet.row_values(row) for row in range(min(sheet.nrows, 1 + SAMPLE_ROWS))]
            sheets.append(_sheet(sheet.name, rows, sheet.nrows))
        names = list(book.sheet_names())
    finally:
        book.release_resources()
    return _workbook(source, "Excel 97-2003", names, sheets)
