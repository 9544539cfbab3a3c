"""The 2 GB path: a huge CSV is described from its first megabyte, in well under 5 s."""

from __future__ import annotations

import random
import time
from pathlib import Path

from tests.files.helpers import describe

BLOCK_BYTES = 1024 * 1024
BLOCKS = 2048  # 2 GiB
REGIONS = ["EU-West", "EU-North", "US-East", "US-West", "APAC", "LATAM"]
PRODUCTS = ["Widget", "Gadget", "Sprocket", "Gizmo", "Doohickey"]


def _block() -> tuple[bytes, int]:
    """About 1 MB of whole, realistic rows, and how many rows it holds."""
    rng = random.Random(7)
    rows: list[str] = []
    size = 0
    while size < BLOCK_BYTES:
        row = (
            f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d},"
            f"{rng.choice(REGIONS)},{rng.choice(PRODUCTS)} {rng.randint(1, 999)},"
            f"{rng.randint(1, 500)},{rng.uniform(0.5, 99.0):.2f},"
            f"{'yes' if rng.random() < 0.3 else 'no'}\n"
        )
        rows.append(row)
        size += len(row)
    return "".join(rows).encode(), len(rows)


def test_a_2_gb_csv_is_described_in_well_under_5_seconds(tmp_path: Path) -> None:
    path = tmp_path / "huge.csv"
    block, rows_per_block = _block()
    try:
        with path.open("wb") as handle:
            handle.write(b"date,region,product,units,price,returned\n")
            for _ in range(BLOCKS):
                handle.write(block)
        assert path.stat().st_size > 2 * 1024**3
        started = time.perf_counter()
        metadata = describe(path)
        elapsed = time.perf_counter() - started
        true_rows = rows_per_block * BLOCKS
        estimate = metadata.details["rows"]
        print(
            f"\n2 GB CSV described in {elapsed * 1000:.0f} ms: {estimate:,} of {true_rows:,} rows"
        )
        assert elapsed < 2.0
        assert metadata.column_names == ["date", "region", "product", "units", "price", "returned"]
        assert [c["dtype"] for c in metadata.details["columns"]][3:5] == ["int64", "float64"]
        assert metadata.details["rows_estimated"] is True
        assert abs(estimate - true_rows) / true_rows < 0.10
    finally:
        path.unlink(missing_ok=True)
