"""A large upload gets a Parquet copy in the background, shown in its status (issue 11)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq  # type: ignore[import-untyped]

from tests.conftest import StartServer, write_replies
from tests.support.waiting import wait_for

ROWS = 60_000


def test_an_uploaded_csv_is_converted_and_then_described_from_its_parquet_footer(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []), PARQUET_CONVERSION_MB="0.5"
    )
    body = "day,store,units\n" + "".join(
        f"2024-01-{1 + i % 28:02d},s{i % 9},{i}\n" for i in range(ROWS)
    )
    with server.client() as http:
        uploaded = http.put("/api/sessions/pq/uploads/sales.csv", content=body.encode())
        assert uploaded.status_code == 201, uploaded.text
        assert uploaded.json()["details"]["conversion"]["state"] in ("queued", "converting", "done")
        seen: list[dict[str, Any]] = []

        def converted() -> bool:
            info = http.get("/api/files/info", params={"session_id": "pq", "name": "sales.csv"})
            assert info.status_code == 200, info.text
            seen.append(info.json())
            return seen[-1]["details"]["conversion"]["state"] in ("done", "failed")

        wait_for(converted, timeout=120)
        info = seen[-1]
        assert info["details"]["conversion"]["state"] == "done", info
        assert info["details"]["rows"] == ROWS and info["details"]["rows_estimated"] is False
        assert info["details"]["parquet"] == "uploads/sales.csv.parquet"
        assert [c["name"] for c in info["details"]["columns"]] == ["day", "store", "units"]
        assert info["summary"] == f"CSV table, 3 columns, {ROWS:,} rows (Parquet copy ready)"
        listed = http.get("/api/files", params={"session_id": "pq"}).json()
        assert [f["name"] for f in listed] == [
            "uploads/sales.csv"
        ]  # the copy is not a file of its own
        workspace = [f["path"] for f in http.get("/api/sessions/pq/files").json()]
        assert "uploads/sales.csv.parquet" in workspace
    copy = pq.read_table(server.data_dir / "scratch/pq/uploads/sales.csv.parquet")
    assert copy.num_rows == ROWS and copy.column("units")[ROWS - 1].as_py() == ROWS - 1
