"""The wire schemas of the tables runs showed (`/api/sessions/{id}/tables/...`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from backend.files.table_summary import TableSummary
from backend.files.tables import TablePage


class TableColumnPublic(BaseModel):
    name: str
    type: str  # DuckDB's SQL type


class ColumnSummaryPublic(TableColumnPublic):
    nulls: int
    distinct: int | None  # approximate
    min: Any
    max: Any
    mean: float | None


class TableSummaryPublic(BaseModel):
    id: str
    rows: int
    columns: list[ColumnSummaryPublic]

    @classmethod
    def of(cls, table_id: str, summary: TableSummary) -> TableSummaryPublic:
        columns = [ColumnSummaryPublic(**vars(column)) for column in summary.columns]
        return cls(id=table_id, rows=summary.rows, columns=columns)


class TablePagePublic(BaseModel):
    total: int  # the rows that pass the filters
    offset: int
    columns: list[TableColumnPublic]
    rows: list[list[Any]]

    @classmethod
    def of(cls, page: TablePage) -> TablePagePublic:
        columns = [TableColumnPublic(name=c.name, type=c.type) for c in page.columns]
        return cls(total=page.total, offset=page.offset, columns=columns, rows=page.rows)
