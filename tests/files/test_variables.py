"""Variable names for data files, and loader code that really loads them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import openpyxl
import pandas as pd
import pytest

from backend.files import (
    FileMetadata,
    InvalidFileMapping,
    assign_dataframe_names,
    loader_code,
    validate_file_paths,
)
from backend.files.model import LARGE_FILE_BYTES
from backend.tools.sandbox import out_of_core
from tests.files.helpers import describe, write_pdf

FRAME = pd.DataFrame({"city": ["Oslo", "Rome"], "pop": [0.7, 2.8]})


def _meta(name: str, kind: str = "tabular", error: str | None = None) -> FileMetadata:
    return FileMetadata(name, name.rsplit(".", 1)[-1], 1, kind, "", {}, error)  # type: ignore[arg-type]


def test_tabular_files_get_df1_df2_in_order() -> None:
    files = [
        _meta("uploads/b.csv"),
        _meta("uploads/r.pdf", "document"),
        _meta("uploads/broken.xlsx", error="damaged"),
        _meta("uploads/a.parquet"),
        _meta("uploads/c.json"),
    ]
    assert assign_dataframe_names(files) == {
        "uploads/b.csv": "df1",
        "uploads/a.parquet": "df2",
        "uploads/c.json": "df3",
    }
    assert assign_dataframe_names(files[:1] + files[3:4], taken={"df1"}) == {
        "uploads/b.csv": "df2",
        "uploads/a.parquet": "df3",
    }


def _write_uploads(uploads: Path) -> None:
    uploads.mkdir()
    (uploads / "semi.csv").write_bytes("city;pop\nOslo;0,7\nRome;2,8\n".encode("latin-1"))
    (uploads / "latin.csv").write_bytes("city,pop\nMünchen,1.5\nGenève,0.2\n".encode("latin-1"))
    FRAME.to_csv(uploads / "tabs.tsv", sep="\t", index=False)
    FRAME.to_csv(uploads / "pipes.txt", sep="|", index=False)
    (uploads / "signal.dat").write_text("1 2.5\n2 3.5\n3 4.5\n")
    FRAME.to_parquet(uploads / "frame.parquet")
    FRAME.to_feather(uploads / "frame.feather")
    (uploads / "records.json").write_text(json.dumps(FRAME.to_dict(orient="records")))
    (uploads / "records.jsonl").write_text(FRAME.to_json(orient="records", lines=True))
    (uploads / "it's.csv").write_text("a,b\n1,2\n")
    book = openpyxl.Workbook()
    sheet = book.active
    assert sheet is not None
    for row in [["city", "pop"], ["Oslo", 0.7], ["Rome", 2.8]]:
        sheet.append(row)
    book.save(uploads / "book.xlsx")
    write_pdf(uploads / "report.pdf", ["hello"])


def _run(code: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(code, "<loader>", "exec"), namespace)
    return namespace


def test_loader_code_loads_every_format(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_uploads(tmp_path / "uploads")
    monkeypatch.chdir(tmp_path)
    files = [describe(path, f"uploads/{path.name}") for path in sorted(Path("uploads").iterdir())]
    mapping = assign_dataframe_names(files)
    variables = {path.rsplit("/", 1)[-1]: name for path, name in mapping.items()}
    mapping["uploads/report.pdf"] = "report"
    namespace = _run(loader_code(mapping, files))

    def frame(name: str) -> pd.DataFrame:
        value = namespace[variables[name]]
        assert isinstance(value, pd.DataFrame), name
        return value

    for name in ("tabs.tsv", "pipes.txt", "frame.parquet", "frame.feather", "book.xlsx"):
        pd.testing.assert_frame_equal(frame(name), FRAME, check_dtype=False)
    for name in ("records.json", "records.jsonl"):
        pd.testing.assert_frame_equal(frame(name), FRAME, check_dtype=False)
    assert frame("semi.csv")["pop"].tolist() == ["0,7", "2,8"]
    assert frame("latin.csv")["city"].tolist() == ["München", "Genève"]
    assert frame("signal.dat").shape == (3, 2)  # whitespace, no header
    assert frame("it's.csv").columns.tolist() == ["a", "b"]
    assert namespace["report"] == "uploads/report.pdf"
    assert "_pd" not in namespace


def test_without_metadata_the_separator_is_sniffed_in_the_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_uploads(tmp_path / "uploads")
    monkeypatch.chdir(tmp_path)
    code = loader_code({"uploads/semi.csv": "semi", "uploads/tabs.tsv": "tabs"})
    namespace = _run(code)
    assert namespace["semi"].columns.tolist() == ["city", "pop"]
    assert namespace["tabs"].shape == (2, 2)
    assert "_sniffed_sep" not in namespace
    assert loader_code({}) == ""


@pytest.mark.parametrize(
    ("mapping", "message"),
    [
        ({"../secret.csv": "s"}, "not a path inside"),
        ({"/etc/passwd": "s"}, "not a path inside"),
        ({"uploads/a.csv": "1abc"}, "not a Python variable name"),
        ({"uploads/a.csv": "class"}, "not a Python variable name"),
        ({"uploads/a.csv": "x = 1; import os"}, "not a Python variable name"),
        ({"uploads/a.csv": "pd"}, "already uses"),
        ({"uploads/a.csv": "list"}, "already uses"),
        ({"uploads/a.csv": "_hidden"}, "already uses"),
        ({"uploads/a.csv": "sales", "uploads/b.csv": "sales"}, "both map to"),
    ],
)
def test_user_mappings_are_validated(mapping: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidFileMapping, match=message):
        validate_file_paths(mapping)


def test_loader_code_refuses_what_would_inject_code() -> None:
    with pytest.raises(InvalidFileMapping):
        loader_code({"uploads/a.csv": "x = __import__('os')"})
    with pytest.raises(InvalidFileMapping):
        loader_code({"uploads/../../a.csv": "x"})
    assert validate_file_paths({"uploads/a.csv": "sales"}) == {"uploads/a.csv": "sales"}


def test_a_table_too_large_for_pandas_becomes_a_duckdb_relation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    (tmp_path / "variables").mkdir()
    (uploads / "big.csv").write_text("k;v\n" + "".join(f"{i % 3};{i}\n" for i in range(1000)))
    FRAME.to_csv(uploads / "small.csv", index=False)
    monkeypatch.chdir(tmp_path)
    big = replace(describe(uploads / "big.csv", "uploads/big.csv"), size=LARGE_FILE_BYTES + 1)
    small = describe(uploads / "small.csv", "uploads/small.csv")
    mapping = {"uploads/big.csv": "sales", "uploads/small.csv": "cities"}
    namespace = _run(loader_code(mapping, [big, small]))
    assert isinstance(namespace["cities"], pd.DataFrame)
    assert "sales" not in namespace  # never read by pandas
    recorded = json.loads((tmp_path / "variables" / "large_tables.json").read_text())
    assert recorded == {
        "sales": {"reader": "read_csv", "path": "uploads/big.csv", "options": {"sep": ";"}}
    }
    # What the sandbox does at the start of a run whose code names `sales`.
    monkeypatch.setattr(duckdb, "connect", duckdb.connect)  # configure() wraps it
    out_of_core.configure("print(sales)", str(tmp_path), 512, namespace)
    relation = namespace["sales"]
    assert isinstance(relation, duckdb.DuckDBPyRelation)
    assert relation.aggregate("count(*), sum(v)").fetchall() == [(1000, sum(range(1000)))]
    duckdb.set_default_connection(duckdb.connect())


def test_a_table_with_a_parquet_copy_is_loaded_from_the_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    (tmp_path / "variables").mkdir()
    (uploads / "a.csv").write_text("this CSV is stale and unreadable;;;\n\x00")
    FRAME.to_parquet(uploads / "a.csv.parquet")
    (uploads / "b.csv").write_text("stale")
    FRAME.to_parquet(uploads / "b.csv.parquet")
    monkeypatch.chdir(tmp_path)
    copy = {"parquet": "uploads/a.csv.parquet", "read_options": {"sep": ";"}}
    small = FileMetadata("uploads/a.csv", "csv", 100, "tabular", details=copy)
    big = FileMetadata(
        "uploads/b.csv",
        "csv",
        LARGE_FILE_BYTES + 1,
        "tabular",
        details={"parquet": "uploads/b.csv.parquet"},
    )
    namespace = _run(loader_code({"uploads/a.csv": "a", "uploads/b.csv": "b"}, [small, big]))
    pd.testing.assert_frame_equal(namespace["a"], FRAME)
    recorded = json.loads((tmp_path / "variables" / "large_tables.json").read_text())
    assert recorded == {
        "b": {"reader": "read_parquet", "path": "uploads/b.csv.parquet", "options": {}}
    }
