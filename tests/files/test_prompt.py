"""The METADATA block: informative per file, and small enough for twenty files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from backend.files import FileMetadata, describe_for_prompt
from backend.files.model import LARGE_FILE_BYTES
from backend.files.prompt import PER_FILE_CHARS
from tests.files.helpers import describe


def test_a_table_shows_its_variable_columns_rows_and_samples(tmp_path: Path) -> None:
    path = tmp_path / "sales.csv"
    path.write_text("region,units,price\nEU,3,2.5\nUS,4,1.25\nAPAC,5,3.0\n")
    metadata = describe(path, "uploads/sales.csv")
    text = describe_for_prompt([metadata], {"uploads/sales.csv": "df1"})
    assert text.splitlines()[0].startswith("Paths are relative")
    assert "- uploads/sales.csv -> df1 [tabular, 49 B]" in text
    assert "columns: region (str), units (int64), price (float64)" in text
    assert "row: EU | 3 | 2.5" in text and "row: US | 4 | 1.25" in text
    assert "APAC" not in text  # two sample rows only


def test_twenty_wide_files_stay_small(tmp_path: Path) -> None:
    files = []
    for index in range(20):
        path = tmp_path / f"wide_{index}.csv"
        header = ",".join(f"column_with_a_long_name_{c}" for c in range(60))
        row = ",".join("some fairly long text value" for _ in range(60))
        path.write_text(f"{header}\n{row}\n{row}\n")
        files.append(describe(path, f"uploads/{path.name}"))
    text = describe_for_prompt(files, {f.name: f"df{i + 1}" for i, f in enumerate(files)})
    blocks = text.split("\n- ")[1:]
    assert len(blocks) == 20
    assert all(len(block) <= PER_FILE_CHARS for block in blocks)
    assert len(text) < 20 * PER_FILE_CHARS + 200
    assert "-> df20" in text


def test_other_kinds_and_errors_get_their_gist() -> None:
    files = [
        FileMetadata("uploads/r.pdf", "pdf", 10, "document", "PDF, 1 page(s)", {"text": "Hello"}),
        FileMetadata(
            "uploads/x.h5",
            "h5",
            10,
            "data",
            "HDF5",
            {"datasets": [{"name": "t", "shape": [3], "dtype": "float32"}]},
        ),
        FileMetadata("uploads/b.xlsx", "xlsx", 10, "tabular", "bad", error="Could not read it"),
    ]
    text = describe_for_prompt(files, {})
    assert "text: Hello" in text
    assert "datasets: t [3] float32" in text
    assert "error: Could not read it" in text
    assert describe_for_prompt([], {}) == "(no data files)"


def test_a_large_table_is_marked_and_the_prompt_says_to_use_duckdb(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_text("key,amount\na,1\nb,2\n")
    metadata = replace(describe(path, "uploads/big.csv"), size=LARGE_FILE_BYTES + 1)
    text = describe_for_prompt([metadata], {"uploads/big.csv": "df1"})
    assert "- uploads/big.csv -> df1 (a DuckDB relation) [tabular, 100.0 MB, LARGE]" in text
    assert "never load them with pandas" in text and "duckdb.sql(" in text
    small = describe_for_prompt([describe(path, "uploads/big.csv")], {"uploads/big.csv": "df1"})
    assert "LARGE" not in small and "duckdb" not in small


def test_a_parquet_copy_and_a_conversion_in_progress_are_named() -> None:
    columns = [{"name": "a", "dtype": "int64"}]
    ready = FileMetadata(
        "uploads/big.csv",
        "csv",
        LARGE_FILE_BYTES * 3,
        "tabular",
        "CSV table, 1 columns, 9,000,000 rows (Parquet copy ready)",
        {"columns": columns, "parquet": "uploads/big.csv.parquet"},
    )
    running = replace(
        ready,
        name="uploads/next.csv",
        details={"columns": columns, "conversion": {"state": "converting", "progress": 41.6}},
    )
    text = describe_for_prompt([ready, running], {"uploads/big.csv": "df1"})
    assert "Parquet copy: uploads/big.csv.parquet" in text
    assert "being converted to Parquet (42%)" in text
