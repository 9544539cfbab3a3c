"""DuckDB in a run: a buffer pool under the run's memory, spilling to the workspace disk.

Part of the in-sandbox program (see `worker.py`); stdlib and data packages only.

Left alone, DuckDB sizes its buffer pool at 80% of the host's RAM, so inside a
sandbox bounded at a few hundred MB it is killed long before it would spill.
A run whose code uses DuckDB gets every connection (the default one behind
`duckdb.sql` and each `duckdb.connect()`) set to a share of the run's memory,
with its spill folder on the workspace's disk, where the worker's disk floor
counts it. The worker deletes the folder after every run.

DuckDB is not fork-safe once it has run: a run that used it does not become the
next zygote (`forkable`); the zygote reloads the variables the run saved instead.

A file too large for pandas is given to the code as a DuckDB relation (`df1`, …).
A relation cannot be saved between runs, so the loader records how to open it in
`variables/large_tables.json`, and each run whose code names it gets it afresh.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import sys
from typing import Any

SPILL_FOLDER = ".duckdb_spill"
LARGE_TABLES = "variables/large_tables.json"  # variable -> {"reader", "path", "options"}
_READERS = ("read_csv", "read_parquet", "read_json")
MEMORY_SHARE = 0.7  # of the run's memory; the rest is Python, pandas and DuckDB's own overhead

_USES_DUCKDB = re.compile(r"\bduckdb\b")
# Code whose run may write large spill files: DuckDB's, and a large `sql()` answer's
# Parquet (sources.py), both in SPILL_FOLDER and deleted after the run.
_SPILLS = re.compile(r"\bduckdb\b|\bsql\s*\(")


def settings(workspace: str, max_memory_mb: float) -> dict[str, str]:
    return {
        "memory_limit": f"{max(64, int(max_memory_mb * MEMORY_SHARE))}MB",
        "temp_directory": os.path.join(workspace, SPILL_FOLDER),
    }


def configure(code: str, workspace: str, max_memory_mb: float, namespace: dict[str, Any]) -> None:
    """Bound DuckDB for this run if its code uses DuckDB or names a large table; bind those
    tables (as relations) that the namespace lacks. Importing DuckDB costs ~0.1 s."""
    tables = {
        name: spec
        for name, spec in _large_tables(workspace).items()
        if name not in namespace and re.search(rf"\b{re.escape(name)}\b", code)
    }
    if not tables and not _USES_DUCKDB.search(code):
        return
    try:
        import duckdb
    except ImportError:
        return
    defaults = settings(workspace, max_memory_mb)
    connect = duckdb.connect

    def bounded_connect(
        database: Any = ":memory:", read_only: bool = False, config: dict[str, Any] | None = None
    ) -> Any:
        return connect(database, read_only=read_only, config={**defaults, **(config or {})})

    duckdb.connect = bounded_connect
    duckdb.set_default_connection(bounded_connect())
    for name, spec in tables.items():
        reader = getattr(duckdb, spec["reader"])
        namespace[name] = reader(os.path.join(workspace, spec["path"]), **spec["options"])


def _large_tables(workspace: str) -> dict[str, dict[str, Any]]:
    """The recorded large tables; whatever the file holds that is not one is skipped."""
    try:
        with open(os.path.join(workspace, LARGE_TABLES), encoding="utf-8") as handle:
            recorded = json.loads(handle.read(1_000_000))
    except (OSError, ValueError):
        return {}
    if not isinstance(recorded, dict):
        return {}
    return {
        name: spec
        for name, spec in recorded.items()
        if isinstance(name, str)
        and name.isidentifier()
        and isinstance(spec, dict)
        and spec.get("reader") in _READERS
        and isinstance(spec.get("path"), str)
        and isinstance(spec.get("options"), dict)
    }


def file_size_limits(
    code: str, workspace: str, max_file_bytes: int, floor_bytes: int
) -> tuple[int, int]:
    """RLIMIT_FSIZE for a run, (soft, hard). The hard limit is what the disk holds above its
    floor; a run that uses DuckDB (or `sql()`) gets it as its soft limit too, so its spill
    files may grow.
    The worker then holds the files a run writes to `max_file_bytes`."""
    try:
        disk = os.statvfs(workspace)
        room = max(max_file_bytes, disk.f_bavail * disk.f_frsize - floor_bytes)
    except OSError:
        room = max_file_bytes
    return (room if _SPILLS.search(code) else max_file_bytes), room


def forkable() -> bool:
    """Whether this run's process may become the zygote, which forks every run: not once
    DuckDB has run in it (a fork keeps its locks, not its threads, and the next run hangs)."""
    return "duckdb" not in sys.modules


def remove_spill(workspace: str) -> None:
    """What a run's DuckDB spilled: gone once the run is, however it ended."""
    shutil.rmtree(os.path.join(workspace, SPILL_FOLDER), ignore_errors=True)


def out_of_memory(exc: BaseException) -> bool:
    """MemoryError (numpy's too), ENOMEM (pandas' CSV reader) or DuckDB's OutOfMemoryException."""
    return (
        isinstance(exc, MemoryError)
        or (isinstance(exc, OSError) and exc.errno == errno.ENOMEM)
        or type(exc).__name__ == "OutOfMemoryException"
    )


def memory_hint(max_memory_mb: float) -> str:
    return (
        f"The run ran out of memory (its limit is {max_memory_mb:g} MB). For data larger "
        "than that, query the file with DuckDB instead of loading it into pandas, e.g. "
        "duckdb.sql(\"SELECT key, count(*) FROM 'uploads/data.csv' GROUP BY key\").df(): "
        "it reads the file in pieces and spills to disk."
    )
