"""The cost of reading file metadata in bubblewrap (issue 24), against the old helper.

Before: a spawned ProcessPoolExecutor worker with rlimits, which opened the file
itself (through `Workspaces`) with the server's rights. After: `IsolatedRunner`
in bubblewrap (`helper_command`), handed the open file as a descriptor; and the
same runner without bubblewrap (SANDBOX=none). For each: the first call (the
helper's start and imports) and the median of warm calls on a small CSV, a
Parquet file and a PNG, as the catalog makes them on a cache miss. Prints the
ratios after/before.

Run from the repository root: `.venv/bin/python -m benchmarks.metadata_isolation`;
`--smoke` makes one warm call of each, to check that it runs (`make test` does).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import io
import multiprocessing
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from backend.files import FileMetadata
from backend.files.catalog import describe_open_file
from backend.files.isolation import IsolatedRunner, _limit_resources
from backend.files.metadata import extract_file_metadata
from backend.storage.sessions import SessionKey, session_key
from backend.storage.workspaces import Workspaces
from backend.tools.sandbox.command import helper_command

KEY = session_key(1, "bench")
CALLS = 100


def old_read(data_dir: str, key: SessionKey, path: str, size: int) -> FileMetadata:
    """What the helper ran before: it opened the file itself."""
    with Workspaces(Path(data_dir)).open_file(key, path) as handle:
        return extract_file_metadata(path, handle, size)


def old_call(
    pool: concurrent.futures.ProcessPoolExecutor, data_dir: str, path: str, size: int
) -> FileMetadata:
    return pool.submit(old_read, data_dir, KEY, path, size).result()


def new_call(runner: IsolatedRunner, workspaces: Workspaces, path: str, size: int) -> FileMetadata:
    with workspaces.open_file(KEY, path) as handle:
        return runner.call(describe_open_file, path, size, file=handle)


def files(workspaces: Workspaces) -> list[tuple[str, int]]:
    import numpy as np
    import pandas as pd
    from PIL import Image

    workspaces.ensure(KEY)
    frame = pd.DataFrame({"day": range(5000), "price": np.arange(5000) * 1.5})
    parquet = io.BytesIO()
    frame.to_parquet(parquet)
    png = io.BytesIO()
    Image.new("RGB", (64, 64)).save(png, format="PNG")
    made = {
        "sales.csv": frame.to_csv(index=False).encode(),
        "sales.parquet": parquet.getvalue(),
        "plot.png": png.getvalue(),
    }
    for name, data in made.items():
        workspaces.write_upload(KEY, name, io.BytesIO(data), 10**9)
    return [(f"uploads/{name}", len(data)) for name, data in made.items()]


def timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    metadata = call()
    assert metadata.error is None, metadata
    return time.perf_counter() - started


def measure(name: str, calls: Sequence[Callable[[], Any]], rounds: int) -> tuple[float, float]:
    first = timed(calls[0])
    warm = [timed(call) for _ in range(rounds) for call in calls]
    median = statistics.median(warm)
    print(f"{name:28} first call {first * 1000:8.1f} ms   warm median {median * 1000:6.2f} ms")
    return first, median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one warm call each, to check it runs")
    rounds = 1 if parser.parse_args().smoke else CALLS
    with tempfile.TemporaryDirectory() as folder:
        data_dir = Path(folder)
        workspaces = Workspaces(data_dir)
        found = files(workspaces)

        pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_limit_resources,
        )
        try:
            before = measure(
                "before: rlimited pool",
                [functools.partial(old_call, pool, str(data_dir), p, s) for p, s in found],
                rounds,
            )
        finally:
            pool.shutdown()

        results = {}
        for label, runner in (
            ("after: bubblewrap", IsolatedRunner(confine=helper_command)),
            ("after: SANDBOX=none", IsolatedRunner()),
        ):
            try:
                calls = [functools.partial(new_call, runner, workspaces, p, s) for p, s in found]
                results[label] = measure(label, calls, rounds)
            finally:
                runner.close()
        for label, (first, median) in results.items():
            print(
                f"{label:28} first call x{first / before[0]:.2f}   "
                f"warm call x{median / before[1]:.2f} (against before)"
            )


if __name__ == "__main__":
    main()
