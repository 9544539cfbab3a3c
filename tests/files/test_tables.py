"""The table queries without a server: XLSX's row cap, formulas kept as text, ids."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from openpyxl import load_workbook

from backend.files import table_downloads
from backend.files.table_downloads import TooManyRowsForXlsx, xlsx_file
from backend.files.tables import TableEngine, TableNotFound, TableQuery, read_page, table_path
from backend.storage.workspaces import Workspaces

KEY = "u1-session"
TABLE = "0123456789ab_1"


@pytest.fixture
def cursor() -> Iterator[duckdb.DuckDBPyConnection]:
    """A cursor of its own engine: the process's may be closed by another test's server."""
    database = TableEngine(64, 1, None, 0)
    with database.cursor() as opened:
        yield opened
    database.database.close()


@pytest.fixture
def workspaces(tmp_path: Path) -> Workspaces:
    workspaces = Workspaces(tmp_path)
    folder = workspaces.ensure(KEY) / "outputs" / ".tables"
    folder.mkdir(parents=True)
    frame = pd.DataFrame({"cell": ["=1+1", "plain\x07bell", None], "n": [1, 2, 3]})
    frame.to_parquet(folder / f"{TABLE}.parquet")
    return workspaces


def test_xlsx_refuses_more_rows_than_a_sheet_holds(
    cursor: duckdb.DuckDBPyConnection, workspaces: Workspaces, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table_downloads, "XLSX_MAX_ROWS", 3)  # the header and 2 rows
    with pytest.raises(TooManyRowsForXlsx, match="at most 3 rows, its header included"):
        xlsx_file(cursor, workspaces, KEY, TABLE, TableQuery())


def test_xlsx_text_is_never_a_formula(
    cursor: duckdb.DuckDBPyConnection, workspaces: Workspaces
) -> None:
    data = b"".join(xlsx_file(cursor, workspaces, KEY, TABLE, TableQuery()))
    sheet = load_workbook(io.BytesIO(data)).active
    assert [c.value for c in sheet["A"]] == ["cell", "=1+1", "plainbell", None]
    assert sheet["A2"].data_type == "s"


def test_links_and_other_ids_are_not_tables(
    cursor: duckdb.DuckDBPyConnection, workspaces: Workspaces, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.parquet"
    pd.DataFrame({"s": ["server file"]}).to_parquet(secret)
    folder = workspaces.path(KEY) / "outputs" / ".tables"
    (folder / "0123456789ab_2.parquet").symlink_to(secret)
    for table_id in ("0123456789ab_2", "../secret", "0123456789ab_0", "0123456789AB_1"):
        with pytest.raises(TableNotFound):
            read_page(cursor, workspaces, KEY, table_id, TableQuery(), 0, 10)
    with pytest.raises(TableNotFound):
        table_path("x/../../y")
