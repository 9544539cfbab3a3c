"""Data larger than a run's memory: DuckDB in the sandbox against pandas, and the host.

Generates a CSV (default 25 M rows, about 2 GB: number, text and date columns) with
5 M distinct keys, puts it in a session's `uploads/`, and runs a group-by over it
through python_coder's custom-code mode (`POST /api/tools/python_coder` with `code`)
on a live server whose runs have 512 MB (`PYTHON_CODE_MAX_MEMORY`):

- DuckDB in the sandbox: wall time and the run's peak memory (VmHWM);
- pandas in the sandbox: it must fail with a message that suggests DuckDB, and the
  session must keep its variables;
- the baseline, in the same run: the same DuckDB query in this process, unbounded.

    .venv/bin/python -m benchmarks.large_data [--rows 25000000] [--memory-mb 512]

Uploads (tus and PUT) are not measured yet: the file is written into the workspace.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb
import httpx

from tests.support.live_server import LiveServer

KEYS = 5_000_000
GROUP_BY = (
    "SELECT key, count(*) AS n, sum(amount) AS total, max(day) AS last_day"
    " FROM 'uploads/big.csv' GROUP BY key"
)
PEAK = (
    "from pathlib import Path\n"
    "status = Path('/proc/self/status').read_text().splitlines()\n"
    "print('peak_kb', next(line.split()[1] for line in status if line.startswith('VmHWM')))\n"
)


def generate(path: Path, rows: int) -> None:
    duckdb.sql(
        f"COPY (SELECT i AS id, i % {KEYS} AS key, (i * 7919 % 100000) / 100.0 AS amount,"
        " 'customer-' || (i % 100003) AS name, DATE '2020-01-01' + (i % 1500)::INTEGER AS day,"
        " 'order ' || i || ' shipped to region ' || (i % 17) || ' by carrier ' || (i % 5) AS note"
        f" FROM range({rows}) t(i)) TO '{path}' (HEADER)"
    )


def run(client: httpx.Client, session: str, code: str) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    response = client.post("/api/tools/python_coder", json={"session_id": session, "code": code})
    response.raise_for_status()
    return response.json(), time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=25_000_000)
    parser.add_argument("--memory-mb", type=int, default=512)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "big.csv"
        started = time.perf_counter()
        generate(source, args.rows)
        size_gb = source.stat().st_size / 1024**3
        print(f"CSV: {args.rows:,} rows, {size_gb:.2f} GB, generated in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip

        started = time.perf_counter()
        query = GROUP_BY.replace("uploads/big.csv", str(source))
        groups = duckdb.execute(f"SELECT count(*) FROM ({query})").fetchall()[0][0]
        host = time.perf_counter() - started
        print(f"Baseline: DuckDB in this process, unbounded: {groups:,} groups in {host:.2f} s")

        server = LiveServer(
            Path(tmp) / "data",
            LLM_BACKEND="scripted",
            SCRIPTED_REPLIES=str(Path(tmp) / "none.json"),
            ADMIN_PASSWORD="benchmark-password",
            PYTHON_CODE_MAX_MEMORY=str(args.memory_mb),
            PYTHON_CODE_TIMEOUT="600",
        )
        (Path(tmp) / "none.json").write_text("[]")
        server.start()
        try:
            headers = {"Authorization": f"Bearer {server.token()}"}
            with httpx.Client(base_url=server.url, headers=headers, timeout=900) as client:
                session = "large-data"
                run(client, session, "x = 'kept'")  # the session exists; its workspace too
                uploads = server.data_dir / "scratch" / session / "uploads"
                shutil.move(source, uploads / "big.csv")

                code = (
                    "import duckdb\n"
                    f'groups = duckdb.sql("SELECT count(*) FROM ({GROUP_BY})").fetchall()[0][0]\n'
                    "print('groups', groups)\n" + PEAK
                )
                result, wall = run(client, session, code)
                out = result["data"]["stdout"].split()
                if result["success"]:
                    peak = int(out[out.index("peak_kb") + 1]) / 1024
                    print(f"DuckDB in the sandbox ({args.memory_mb} MB): "
                          f"{int(out[out.index('groups') + 1]):,} groups in {wall:.2f} s "
                          f"({wall / host:.2f}x the baseline), peak {peak:.0f} MB")  # fmt: skip
                else:
                    print(f"DuckDB in the sandbox FAILED after {wall:.1f} s: {result['error']}")

                code = (
                    "import pandas as pd\n"
                    "frame = pd.read_csv('uploads/big.csv')\n"
                    "print(frame.groupby('key')['amount'].sum().size)\n"
                )
                result, wall = run(client, session, code)
                verdict = "FAILED, as it should" if not result["success"] else "completed (!)"
                print(f"pandas in the sandbox: {verdict} after {wall:.1f} s")
                print(f"  its message: {str(result.get('error'))[-300:]!r}")
                kept, _ = run(client, session, "print(x)")
                survived = kept["data"]["stdout"].strip() == "kept"
                print(f"  the session kept its variables: {survived}")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
