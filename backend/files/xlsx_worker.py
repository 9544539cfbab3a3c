"""Builds an XLSX sheet in a process of its own, from Arrow batches on its stdin.

openpyxl writes a cell at a time in Python: in the server's process that holds the GIL
for up to a minute, and every other request waits for it (noisy_neighbour saw B's p99 go
past a second). The server's thread reads the table with DuckDB and streams it here as
Arrow IPC; this process, below the server's priority, writes the workbook to the file
descriptor it was given and exits 0. Its arguments are the sheet's name and that
descriptor; it gets no environment to speak of, and no path of the server's.
"""

from __future__ import annotations

import datetime
import os
import sys
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from openpyxl import Workbook  # type: ignore[import-untyped]
from openpyxl.cell.cell import (  # type: ignore[import-untyped]
    ILLEGAL_CHARACTERS_RE,
    WriteOnlyCell,
)

NICE = 10  # as the sandboxes: below the server that answers everyone


def xlsx_cell(sheet: Any, value: Any) -> Any:
    """A value openpyxl can write as data: text is never a formula, nor holds characters
    XML cannot; time zones and other types become text."""
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        value = value.isoformat()
    elif isinstance(value, bytes | list | dict | datetime.timedelta):
        value = str(value)
    if not isinstance(value, str):
        return value
    cell = WriteOnlyCell(sheet, value=ILLEGAL_CHARACTERS_RE.sub("", value))
    cell.data_type = "s"
    return cell


def main() -> None:
    os.nice(NICE)
    sheet_name, descriptor = sys.argv[2], int(sys.argv[3])  # argv[1]: our code's folder
    workbook = Workbook(write_only=True)
    sheet = workbook.create_sheet(sheet_name)
    with pa.ipc.open_stream(sys.stdin.buffer) as reader:
        sheet.append([xlsx_cell(sheet, name) for name in reader.schema.names])
        for batch in reader:
            for row in zip(*(column.to_pylist() for column in batch.columns), strict=True):
                sheet.append([xlsx_cell(sheet, value) for value in row])
    with os.fdopen(descriptor, "wb") as out:
        workbook.save(out)
