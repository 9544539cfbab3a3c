"""A large upload gets a Parquet copy in the background, shown in its status (issue 11)."""

from __future__ import annotations

import io
import json
import random
import string
from concurrent.futures import ThreadPoolExecutor
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
    copy = pq.read_table(server.data_dir / "scratch/u1-pq/uploads/sales.csv.parquet")
    assert copy.num_rows == ROWS and copy.column("units")[ROWS - 1].as_py() == ROWS - 1


def _ids_csv(rows: int) -> bytes:
    """Random 8-letter ids: their Parquet copy is larger than the CSV (lengths, little
    to compress), so the copy is over a file size limit that the CSV is under."""
    pick = random.Random(7).choices
    letters = string.ascii_letters + string.digits
    return ("id\n" + "".join("".join(pick(letters, k=8)) + "\n" for _ in range(rows))).encode()


WAIT_FOR_THE_COPY = """
import time
from pathlib import Path
Path('outputs/started.txt').write_text('waiting')
deadline = time.monotonic() + 100
while not Path('uploads/ids.csv.parquet').exists() and time.monotonic() < deadline:
    time.sleep(0.02)
print(sorted(path.name for path in Path('uploads').iterdir()))
"""


def test_a_run_during_an_upload_and_its_conversion_is_judged_only_on_what_it_wrote(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []),
        PARQUET_CONVERSION_MB="0.5",
        PYTHON_CODE_MAX_FILE_SIZE="1",
        PYTHON_CODE_TIMEOUT="120",
    )
    body = _ids_csv(112_000)
    limit = 1024 * 1024
    assert len(body) < limit
    with server.client() as http, ThreadPoolExecutor(1) as pool:
        first = http.post("/api/tools/python_coder", json={"session_id": "pq", "code": "x = 1"})
        assert first.json()["success"], first.text

        def run() -> dict[str, Any]:
            with server.client(timeout=180) as own:
                body = {"session_id": "pq", "code": WAIT_FOR_THE_COPY, "timeout": 110}
                return dict(own.post("/api/tools/python_coder", json=body).json())

        running = pool.submit(run)

        def started() -> bool:
            listed = http.get("/api/sessions/pq/files").json()
            return "outputs/started.txt" in [f["path"] for f in listed] or running.done()

        wait_for(started, timeout=60)
        assert not running.done(), running.result()
        # The upload and its Parquet copy both land while the run waits for the copy.
        uploaded = http.put("/api/sessions/pq/uploads/ids.csv", content=body)
        assert uploaded.status_code == 201, uploaded.text
        result = running.result(timeout=170)
        assert result["success"], result
        assert "ids.csv.parquet" in result["data"]["stdout"]
        # Only the run's own file is listed: no upload, no copy, no draft; nothing undone.
        assert result["data"]["files"] == ["outputs/started.txt"], result
        assert ".draft" not in json.dumps(result)

        def converted() -> bool:
            info = http.get("/api/files/info", params={"session_id": "pq", "name": "ids.csv"})
            return info.json()["details"]["conversion"]["state"] in ("done", "failed")

        wait_for(converted, timeout=120)
        copy = http.get("/api/sessions/pq/files/uploads/ids.csv.parquet")
        assert copy.status_code == 200, copy.text
        assert len(copy.content) > limit  # over the run's file size limit, and kept
        assert pq.read_table(io.BytesIO(copy.content)).num_rows == 112_000
        # The next run sees the copy as a file that was there before it: not its own.
        again = http.post("/api/tools/python_coder", json={"session_id": "pq", "code": "x = 2"})
        assert again.json()["success"] and again.json()["data"]["files"] == [], again.text
