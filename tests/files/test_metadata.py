"""Dispatch: every supported extension has a reader, failures become `error`, links are refused."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from backend.files import UnsupportedFileType
from backend.files.metadata import READERS, extract_file_metadata
from backend.storage.workspaces import SUPPORTED_EXTENSIONS, NotARegularFile, Workspaces
from tests.files.helpers import describe


def test_every_supported_extension_has_a_reader() -> None:
    assert set(READERS) == set(SUPPORTED_EXTENSIONS)


@pytest.mark.parametrize("name", ["tool.exe", "Makefile", "archive.7z"])
def test_an_unsupported_extension_raises(name: str) -> None:
    with pytest.raises(UnsupportedFileType, match="not supported") as raised:
        extract_file_metadata(name, io.BytesIO(b"x"), 1)
    assert raised.value.name == name


@pytest.mark.parametrize("extension", sorted(SUPPORTED_EXTENSIONS))
def test_garbage_never_raises(tmp_path: Path, extension: str) -> None:
    path = tmp_path / f"garbage.{extension}"
    path.write_bytes(bytes(range(256)) * 8 + b"\xff\xfe\x00garbage")
    metadata = describe(path)
    assert metadata.extension == extension
    json.dumps(metadata.to_dict())


@pytest.mark.parametrize(
    "name",
    ["x.parquet", "x.feather", "x.xlsx", "x.xls", "x.docx", "x.pdf", "x.png", "x.h5", "x.zip"],
)
def test_a_damaged_binary_format_reports_a_human_error(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"\x00\x01 definitely not the right format \x02" * 20)
    metadata = describe(path)
    assert metadata.error is not None
    assert metadata.error.startswith(f"Could not read this .{path.suffix[1:]} file: ")
    assert "\n" not in metadata.error and len(metadata.error) < 300
    assert metadata.summary == metadata.error


def test_an_empty_file_is_fine(tmp_path: Path) -> None:
    """Described without raising: empty text is 0 lines, an empty table or JSON document
    is a one-line human reason."""
    described = {}
    for name in ("empty.csv", "empty.txt", "empty.json"):
        path = tmp_path / name
        path.write_bytes(b"")
        described[name] = describe(path)
    for metadata in described.values():
        assert metadata.size == 0 and metadata.summary and "\n" not in metadata.summary
    text = described["empty.txt"]
    assert text.error is None and text.details["lines"] == 0
    for name in ("empty.csv", "empty.json"):
        error = described[name].error or ""
        assert error.startswith(f"Could not read this .{name.rsplit('.', 1)[1]} file: ")


def test_workspace_files_open_without_following_links(tmp_path: Path) -> None:
    workspaces = Workspaces(tmp_path / "data")
    root = workspaces.ensure("u1-s1")
    secret = tmp_path / "secret.csv"
    secret.write_text("password\nhunter2\n")
    (root / "uploads" / "real.csv").write_text("a,b\n1,2\n")
    (root / "uploads" / "link.csv").symlink_to(secret)
    (root / "uploads" / "dir").symlink_to(tmp_path)

    with workspaces.open_file("u1-s1", "uploads/real.csv") as handle:
        metadata = extract_file_metadata("uploads/real.csv", handle, 8)
    assert metadata.column_names == ["a", "b"]
    for planted in ("uploads/link.csv", "uploads/dir/secret.csv"):
        with pytest.raises(NotARegularFile):
            workspaces.open_file("u1-s1", planted)


@pytest.mark.parametrize("name", ["shop.sqlite", "shop.db", "shop.duckdb"])
def test_a_database_file_is_described_by_its_tables(tmp_path: Path, name: str) -> None:
    import sqlite3

    import duckdb

    path = tmp_path / name
    statements = [
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)",
        "CREATE TABLE orders (id INTEGER PRIMARY KEY,"
        " customer_id INTEGER REFERENCES customers(id), amount DOUBLE)",
        "INSERT INTO customers VALUES (1, 'Ada')",
        "INSERT INTO orders VALUES (1, 1, 2.5)",
    ]
    connection = duckdb.connect(str(path)) if name.endswith("duckdb") else sqlite3.connect(path)
    for statement in statements:
        connection.execute(statement)
    connection.commit()
    connection.close()
    metadata = describe(path)
    assert metadata.error is None and metadata.kind == "data"
    assert "2 tables: customers (id, name); orders (id, customer_id, amount)" in metadata.summary
    tables = {table["name"]: table for table in metadata.details["tables"]}
    columns = {column["name"]: column for column in tables["orders"]["columns"]}
    assert columns["id"]["key"] == "primary"
    assert columns["customer_id"]["references"] == "customers.id"
    assert tables["customers"]["columns"][1]["samples"] == ["Ada"]
