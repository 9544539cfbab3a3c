"""Parquet and Feather: schema and row count from the metadata, not the data."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq

from tests.files.helpers import describe


def _frame(rows: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": range(rows),
            "name": [f"n{i}" for i in range(rows)],
            "when": pd.date_range("2024-01-01", periods=rows, freq="h"),
        }
    )


def test_parquet_schema_rows_and_samples(tmp_path: Path) -> None:
    path = tmp_path / "events.parquet"
    pq.write_table(
        pa.Table.from_pandas(_frame(2500), preserve_index=False), path, row_group_size=1000
    )
    metadata = describe(path)
    assert (metadata.kind, metadata.error) == ("tabular", None)
    assert metadata.details["columns"] == [
        {"name": "id", "dtype": "int64"},
        {"name": "name", "dtype": "large_string"},
        {"name": "when", "dtype": "timestamp[us]"},
    ]
    assert (metadata.details["rows"], metadata.details["row_groups"]) == (2500, 3)
    assert metadata.details["sample_rows"][1] == [1, "n1", "2024-01-01T01:00:00"]


def test_feather_rows_are_summed_from_the_batch_headers(tmp_path: Path) -> None:
    path = tmp_path / "events.feather"
    feather.write_feather(_frame(10_000), path, chunksize=3000, compression="zstd")
    metadata = describe(path)
    assert metadata.error is None
    assert metadata.details["rows"] == 10_000
    assert metadata.details["record_batches"] == 4
    assert metadata.column_names == ["id", "name", "when"]
    assert "sample_rows" not in metadata.details  # decoding a batch could be a bomb


def test_an_empty_feather(tmp_path: Path) -> None:
    path = tmp_path / "empty.feather"
    feather.write_feather(_frame(0), path)
    metadata = describe(path)
    assert (metadata.error, metadata.details["rows"]) == (None, 0)


def test_damaged_and_legacy_files_are_errors(tmp_path: Path) -> None:
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1" + bytes(100))
    assert describe(broken).error is not None
    legacy = tmp_path / "legacy.feather"
    legacy.write_bytes(b"FEA1" + bytes(100))
    error = describe(legacy).error
    assert error is not None and "Feather v1" in error
