"""Excel workbooks: xlsx/xlsm via openpyxl, legacy xls via xlrd, zip bombs refused."""

from __future__ import annotations

import datetime
from pathlib import Path

import openpyxl

from tests.files.helpers import describe, zip_bomb_bytes
from tests.files.xls_writer import write_xls


def test_an_xlsx_gives_sheets_columns_and_row_counts(tmp_path: Path) -> None:
    path = tmp_path / "report.xlsx"
    book = openpyxl.Workbook()
    sales = book.active
    assert sales is not None
    sales.title = "Sales"
    sales.append(["day", "region", "amount", None])
    for day in range(1, 41):
        sales.append([datetime.datetime(2024, 1, day % 28 + 1), "EU", day * 1.5])
    costs = book.create_sheet("Costs")
    costs.append(["item", "cost"])
    costs.append(["rent", 1200])
    book.save(path)

    metadata = describe(path)
    assert (metadata.kind, metadata.error) == ("tabular", None)
    assert metadata.details["sheet_names"] == ["Sales", "Costs"]
    assert metadata.details["columns"] == [
        {"name": "day", "dtype": "datetime64"},
        {"name": "region", "dtype": "str"},
        {"name": "amount", "dtype": "float64"},
    ]
    assert metadata.details["rows"] == 40
    assert metadata.details["sample_rows"][0] == ["2024-01-02T00:00:00", "EU", 1.5]
    costs_sheet = metadata.details["sheets"][1]
    assert (costs_sheet["rows"], costs_sheet["columns"][1]) == (
        1,
        {"name": "cost", "dtype": "int64"},
    )
    assert "2 sheet(s) (Sales, Costs)" in metadata.summary


def test_a_legacy_xls(tmp_path: Path) -> None:
    path = tmp_path / "old.xls"
    write_xls(path, {"Data": [["city", "pop"], ["Oslo", 0.7], ["Rome", 2.8]], "Empty": []})
    metadata = describe(path)
    assert (metadata.kind, metadata.error) == ("tabular", None)
    assert metadata.details["sheet_names"] == ["Data", "Empty"]
    assert metadata.column_names == ["city", "pop"]
    assert metadata.details["rows"] == 2
    assert metadata.details["sample_rows"] == [["Oslo", 0.7], ["Rome", 2.8]]


def test_a_zip_bomb_posing_as_xlsx_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.xlsx"
    path.write_bytes(zip_bomb_bytes("xl/worksheets/sheet1.xml"))
    metadata = describe(path)
    assert metadata.error is not None and "zip bomb" in metadata.error
    assert metadata.kind == "tabular"


def test_a_damaged_workbook_is_an_error_not_an_exception(tmp_path: Path) -> None:
    for name in ("broken.xlsx", "broken.xls"):
        path = tmp_path / name
        path.write_bytes(b"PK\x03\x04 this is not really a workbook" * 10)
        metadata = describe(path)
        assert metadata.error is not None and metadata.error.startswith("Could not read")
