"""CSV, TSV and delimited .txt/.dat: sniffing, dtypes, encodings and row estimates."""

from __future__ import annotations

from pathlib import Path

from tests.files.helpers import describe


def test_a_csv_gives_columns_dtypes_rows_and_samples(tmp_path: Path) -> None:
    path = tmp_path / "sales.csv"
    path.write_text("region,units,price\nEU,3,2.5\nUS,4,1.25\nAPAC,,3.0\n")
    metadata = describe(path)
    assert (metadata.kind, metadata.error, metadata.extension) == ("tabular", None, "csv")
    assert metadata.details["columns"] == [
        {"name": "region", "dtype": "str"},
        {"name": "units", "dtype": "float64"},
        {"name": "price", "dtype": "float64"},
    ]
    assert (metadata.details["rows"], metadata.details["rows_estimated"]) == (3, False)
    assert metadata.details["sample_rows"][2] == ["APAC", None, 3.0]
    assert metadata.summary == "CSV table, 3 columns, 3 rows"


def test_the_delimiter_is_sniffed(tmp_path: Path) -> None:
    path = tmp_path / "eu.csv"
    path.write_text('name;amount;note\n"Smith, J";1,5;ok\nDoe;2;"a;b"\n')
    metadata = describe(path)
    assert metadata.details["delimiter_name"] == "semicolon"
    assert metadata.column_names == ["name", "amount", "note"]
    assert metadata.details["read_options"] == {"sep": ";"}


def test_tsv(tmp_path: Path) -> None:
    path = tmp_path / "table.tsv"
    path.write_text("a\tb\n1\tx\n2\ty\n")
    metadata = describe(path)
    assert metadata.details["delimiter"] == "\t"
    assert metadata.details["columns"][0] == {"name": "a", "dtype": "int64"}


def test_latin1_falls_back_and_a_bom_is_dropped(tmp_path: Path) -> None:
    latin = tmp_path / "cities.csv"
    latin.write_bytes("city,pop\nMünchen,1.5\nGenève,0.2\n".encode("latin-1"))
    metadata = describe(latin)
    assert metadata.details["encoding"] == "latin-1"
    assert metadata.details["sample_rows"][0] == ["München", 1.5]
    assert metadata.details["read_options"]["encoding"] == "latin-1"
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbfid,value\n1,2\n")
    assert describe(bom).column_names == ["id", "value"]


def test_utf16_text_is_read(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text("a\tb\n1\t2\n", encoding="utf-16")
    metadata = describe(path)
    assert metadata.column_names == ["a", "b"]
    assert metadata.details["encoding"] == "utf-16"


def test_a_txt_is_a_table_only_when_it_looks_like_one(tmp_path: Path) -> None:
    prose = tmp_path / "notes.txt"
    prose.write_text("Dear team,\nthe numbers are in, and they look good.\nBest, Ann\n")
    metadata = describe(prose)
    assert metadata.kind == "text"
    assert metadata.details["first_lines"][0] == "Dear team,"
    assert metadata.details["lines"] == 3
    table = tmp_path / "export.txt"
    table.write_text("id|name\n1|a\n2|b\n")
    assert describe(table).kind == "tabular"


def test_a_whitespace_dat_without_header(tmp_path: Path) -> None:
    path = tmp_path / "signal.dat"
    path.write_text("".join(f"{i}  {i * 0.5:.2f}   {i % 3}\n" for i in range(50)))
    metadata = describe(path)
    assert metadata.kind == "tabular"
    assert metadata.details["read_options"] == {"sep": r"\s+", "header": None}
    assert metadata.column_names == ["0", "1", "2"]
    assert metadata.details["rows"] == 50


def test_a_binary_dat_is_raw_data(tmp_path: Path) -> None:
    path = tmp_path / "blob.dat"
    path.write_bytes(bytes(range(256)) * 4)
    metadata = describe(path)
    assert (metadata.kind, metadata.error) == ("data", None)
    assert metadata.summary == "binary data, 1.0 KB"


def test_rows_past_the_sample_are_estimated(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    rows = [f"{i},item-{i % 97},{i * 1.5:.1f}\n" for i in range(150_000)]
    path.write_text("id,item,value\n" + "".join(rows))
    metadata = describe(path)
    assert metadata.details["rows_estimated"] is True
    assert abs(metadata.details["rows"] - 150_000) / 150_000 < 0.10
    assert "~" in metadata.summary and "estimated" in metadata.summary


def test_a_quoted_newline_cut_by_the_sample_is_survived(tmp_path: Path) -> None:
    path = tmp_path / "notes.csv"
    row = '{},"first line\nsecond line of a note that goes on for a while",{}\n'
    path.write_text("id,note,score\n" + "".join(row.format(i, i % 7) for i in range(40_000)))
    metadata = describe(path)
    assert metadata.error is None
    assert metadata.column_names == ["id", "note", "score"]
    assert abs(metadata.details["rows"] - 40_000) / 40_000 < 0.10
