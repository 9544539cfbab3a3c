"""The tables a run showed, as the server takes them from the sandbox (`shown_tables.py`).

What the sandbox reports is untrusted: each table is checked and bounded here (its id
must be the run's own, its preview at most PREVIEW_ROWS short rows), and anything else
is dropped. The server reads a table's rows only from its Parquet, by id.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

logger = logging.getLogger(__name__)

TABLES_FOLDER = "outputs/.tables"  # shown_tables.TABLES_FOLDER
TABLE_ID = re.compile(r"[0-9a-f]{12}_[1-9]")  # the worker's run id, then the table's number
MAX_TABLES = 5
PREVIEW_ROWS = 20
MAX_COLUMNS = 1_000
MAX_TEXT = 200
MAX_DISPLAY = 20_000

Cell = str | int | float | bool | None
TableSource = Literal["expression", "printed", "variable"]  # how the run showed it


def table_file(table_id: str) -> str:
    """The workspace path of table `table_id`; ValueError for anything but a table id."""
    if not TABLE_ID.fullmatch(table_id):
        raise ValueError("not a table id")
    return f"{TABLES_FOLDER}/{table_id}.parquet"


class TableColumn(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str = Field(max_length=MAX_TEXT)
    type: str = Field(max_length=MAX_TEXT)


class TablePreview(BaseModel):
    """A table a run showed: its id, variable name (if any), how it was shown, its row
    count, columns with their Arrow types, and its first rows."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(pattern=TABLE_ID.pattern)
    name: str = Field(default="", max_length=MAX_TEXT)
    source: TableSource
    rows: int = Field(ge=0)
    columns: list[TableColumn] = Field(max_length=MAX_COLUMNS)
    preview: list[list[Cell]] = Field(max_length=PREVIEW_ROWS)
    display: str = ""  # the cell's last expression: its text, as a notebook shows it

    @field_validator("display")
    @classmethod
    def _short_display(cls, text: str) -> str:
        return text[:MAX_DISPLAY]

    @field_validator("preview")
    @classmethod
    def _short_cells(cls, rows: list[list[Cell]]) -> list[list[Cell]]:
        return [
            [c[:MAX_TEXT] if isinstance(c, str) else c for c in row[:MAX_COLUMNS]] for row in rows
        ]


def parse_tables(raw: Any, run: str) -> list[TablePreview]:
    """The valid tables among what the sandbox reported for its run `run`."""
    tables: list[TablePreview] = []
    for item in raw[:MAX_TABLES] if isinstance(raw, list) else ():
        try:
            table = TablePreview.model_validate(item)
        except ValidationError as exc:
            logger.warning("A run reported a table that is not one: %s", exc.errors()[:1])
            continue
        if table.id.rsplit("_", 1)[0] == run:
            tables.append(table)
    return tables
