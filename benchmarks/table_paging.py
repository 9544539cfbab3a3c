"""Paging a 10M-row table through the API, against DuckDB over the same Parquet in-process.

A live server on the scripted model runs one ReAct turn whose code makes a 10M-row
DataFrame (id, a float, a text column, an integer) and shows it; the turn's `table`
event names the table. Then, in the same run:

- the first page (`GET <table>/rows`, 50 rows) and a sort (by the float, descending,
  50 rows), each the median of several requests, against the same queries in this
  process (DuckDB over the table's Parquet, one connection, the same threads): ratios;
  and, for scale, an API request that reads no table;
- the server's resident memory (VmRSS) while it is paged through: pages at random
  offsets, sorted, filtered and not, for a few seconds.

Goals: within 1.5x of in-process DuckDB, the first page under 300 ms, and the server's
memory grows by less than 50 MB while a user pages.

    .venv/bin/python -m benchmarks.table_paging [--rows 10000000] [--seconds 20] [--smoke]

`--smoke`: 10,000 rows, each request once, half a second of paging, to check that it
runs (`make test` does).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import httpx

from tests.conftest import scripted_server
from tests.support.agent_script import sse_events
from tests.support.live_server import LiveServer

REPEATS = 15
CODE = """import numpy as np, pandas as pd
rng = np.random.default_rng(7)
big = pd.DataFrame({{'id': np.arange({rows}), 'x': rng.normal(size={rows}),
    'city': rng.choice(['paris', 'lyon', 'nice', 'lille'], {rows}),
    'k': rng.integers(0, 1000, {rows})}})
big
"""


def replies(rows: int) -> list[dict[str, Any]]:
    tag = "Q-BENCH-TABLE"
    return [
        {"when": ["[stage: react]", tag], "content": f"Action: coder\nAction Input: {tag}"},
        {"when": ["[stage: generate]", tag], "content": f"```python\n{CODE.format(rows=rows)}```"},
        {"when": ["[stage: review]", tag], "content": '{"answers_question": true}'},
        {"when": ["[stage: answer]", tag], "content": "Here is the table."},
    ]


def show_table(server: LiveServer) -> dict[str, Any]:
    body = {"message": "Q-BENCH-TABLE show it", "session_id": "bench", "agent_type": "react",
            "stream": True}  # fmt: skip
    with server.client(timeout=900) as http, http.stream("POST", "/api/chat", json=body) as reply:
        reply.raise_for_status()
        for name, data in sse_events(reply.iter_lines()):
            if name == "table":
                return data
    raise RuntimeError(f"the turn showed no table; see {server.log_path}")


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def page_through(http: httpx.Client, url: str, rows: int, seconds: float, pid: int) -> str:
    """Pages at random offsets (sorted, filtered, plain) for `seconds`; RSS before and peak."""
    before = rss_mb(pid)
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], rss_mb(pid))

    sampler = threading.Thread(target=sample)
    sampler.start()
    chooser = random.Random(1)
    filters = json.dumps([{"column": "city", "op": "contains", "value": "li"}])
    pages = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            params: dict[str, Any] = {"offset": chooser.randrange(0, rows // 2), "limit": 50}
            kind = pages % 3
            if kind == 1:
                params.update(sort=chooser.choice(["x", "k", "city"]), order="desc")
                params["offset"] = chooser.randrange(0, 5_000)
            elif kind == 2:
                params["filters"] = filters
            http.get(f"{url}/rows", params=params).raise_for_status()
            pages += 1
    finally:
        done.set()
        sampler.join()
    after = rss_mb(pid)
    return (
        f"{pages} pages in {seconds:g} s: server RSS {before:.0f} MB before, peak "
        f"{peak[0]:.0f} MB, {after:.0f} MB after: growth {peak[0] - before:.0f} MB "
        f"(goal < 50 MB)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--smoke", action="store_true", help="a small table, to check it runs")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.seconds = 10_000, 0.5
    with tempfile.TemporaryDirectory() as folder:
        env = {"PYTHON_CODE_TIMEOUT": "900", "PYTHON_CODE_MAX_MEMORY": "4096",
               "PYTHON_CODE_MAX_FILE_SIZE": "2048"}  # fmt: skip
        with scripted_server(Path(folder), replies(args.rows), **env) as server:
            started = time.perf_counter()
            table = show_table(server)
            print(f"turn that made and showed {table['rows']:,} rows: "
                  f"{time.perf_counter() - started:.1f} s")  # fmt: skip
            parquet = next((Path(folder) / "data" / "scratch").glob("*/outputs/.tables/*.parquet"))
            print(f"table file: {parquet.stat().st_size / 1e6:.0f} MB of Parquet")
            assert server.process is not None
            with server.client(timeout=120) as http:
                report(http, table["url"], parquet, 1 if args.smoke else REPEATS)
                print(page_through(http, table["url"], args.rows, args.seconds, server.process.pid))


def report(http: httpx.Client, url: str, parquet: Path, repeats: int) -> None:
    def get(**params: Any) -> Callable[[], object]:
        return lambda: http.get(f"{url}/rows", params=params).raise_for_status()

    cold = time.perf_counter()
    get(limit=50)()
    print(f"first page, first request: {(time.perf_counter() - cold) * 1000:.0f} ms")
    database = duckdb.connect(config={"threads": 2})
    path = str(parquet)
    first_sql = "SELECT * FROM read_parquet(?) LIMIT 50 OFFSET 0"
    sort_sql = (
        "SELECT * EXCLUDE (file_row_number) FROM read_parquet(?, file_row_number = true)"
        " ORDER BY x DESC NULLS LAST, file_row_number LIMIT 50 OFFSET 0"
    )
    plain_sort = "SELECT * FROM read_parquet(?) ORDER BY x DESC LIMIT 50"
    cases = [
        ("first page", get(limit=50), lambda: database.execute(first_sql, [path]).fetchall()),
        (
            "sort by x desc",
            get(limit=50, sort="x", order="desc"),
            lambda: database.execute(sort_sql, [path]).fetchall(),
        ),
    ]
    for name, server, local in cases:
        api, baseline = median_seconds(server, repeats), median_seconds(local, repeats)
        print(f"{name}: API {api * 1000:.0f} ms, in-process DuckDB {baseline * 1000:.0f} ms, "
              f"ratio {api / baseline:.2f}x (goal <= 1.5x)")  # fmt: skip
    floor = median_seconds(lambda: http.get("/api/users/me").raise_for_status(), repeats)
    print(f"(an API request that reads no table, GET /api/users/me: {floor * 1000:.1f} ms)")
    unstable = median_seconds(lambda: database.execute(plain_sort, [path]).fetchall(), repeats)
    print(f"(in-process DuckDB's sort without the stable tie-break: {unstable * 1000:.0f} ms)")
    summary = time.perf_counter()
    http.get(url).raise_for_status()
    print(f"summary (first time, then kept): {(time.perf_counter() - summary) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
