"""One Parquet copy of a tabular workspace file, written by DuckDB `COPY` in a helper process.

This runs in a spawned, resource-limited process (`conversion.py` starts it),
never in the server: the file is untrusted and a 20 GB CSV takes minutes. The
source is opened without following links (the sandbox may have planted one)
and handed to DuckDB as `/proc/self/fd/N`; the copy goes to a draft beside the
twin's name and is renamed into place only once complete, on disk, and only if
the source did not change meanwhile. Progress goes back over `channel`.
"""

from __future__ import annotations

import contextlib
import csv
import os
import resource
import shutil
import signal
import tempfile
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from backend.storage.workspaces import DISK_FLOOR, Workspaces

SCRATCH_PREFIX = "parquet-"  # DuckDB's spill and an Excel sheet's CSV, under DATA_DIR
PROGRESS_EVERY = 0.5  # seconds between progress messages
CPU_LIMIT = 6 * 3600  # seconds; a copy is a single pass, far below this
_EXCEL = ("xlsx", "xlsm")


def convert(
    data_dir: str,
    session_id: str,
    source: str,
    twin: str,
    identity: tuple[int, float],
    memory_mb: int,
    quota_left: int,
    channel: Connection,
) -> None:
    """Copy `source` to `twin` as Parquet, writing at most `quota_left` bytes (-1: no
    quota); sends ("progress", percent) and then ("done", rows) or ("failed", message)."""
    lock = threading.Lock()

    def send(kind: str, value: Any) -> None:
        with lock:
            channel.send((kind, value))

    try:
        rows = _convert(
            Path(data_dir), session_id, source, twin, identity, memory_mb, quota_left, send
        )
    except Exception as exc:  # every failure is the file's status, not a crash
        send("failed", _human(exc))
    else:
        send("done", rows)
    finally:
        channel.close()


def _limit(memory_mb: int, room: int) -> None:
    memory = (memory_mb + 2048) * 1024**2  # DuckDB maps more than it uses
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT, CPU_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Written files stop at the disk floor; the write fails (EFBIG) instead of killing us.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (max(room, 1), max(room, 1)))


def _convert(
    data_dir: Path,
    session_id: str,
    source: str,
    twin: str,
    identity: tuple[int, float],
    memory_mb: int,
    quota_left: int,
    send: Any,
) -> int:
    workspaces = Workspaces(data_dir)
    room = workspaces.room(session_id)
    if quota_left >= 0:  # the owner's quota too: the copy is written in their workspace
        room = min(room, quota_left)
    _limit(memory_mb, room)
    import duckdb  # after the limits: its allocator sees them

    scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=data_dir))
    with workspaces.open_file(session_id, source) as handle:
        if _identity(handle.fileno()) != identity:
            raise RuntimeError("the file changed before its conversion started")
        draft = workspaces.draft(session_id, twin)
        try:
            connection = duckdb.connect(
                config={
                    "memory_limit": f"{memory_mb}MB",
                    "temp_directory": str(scratch),
                }
            )
            connection.execute("SET enable_progress_bar = true")  # query_progress needs it
            connection.execute("SET enable_progress_bar_print = false")
            query = _reader(source, handle.fileno(), scratch)
            target = f"/proc/self/fd/{draft.fd}"
            statement = f"COPY ({query}) TO '{target}' (FORMAT parquet, USE_TMP_FILE false)"
            rows = _copy_with_progress(connection, statement, send)
            connection.close()
            if _identity(handle.fileno()) != identity:
                raise RuntimeError("the file changed during its conversion")
            draft.commit(durable=True)
        except BaseException:
            draft.abort()
            raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return rows


def _identity(fd: int) -> tuple[int, float]:
    info = os.fstat(fd)
    return info.st_size, info.st_mtime


def _reader(source: str, fd: int, scratch: Path) -> str:
    """The SELECT that reads the source (its path never enters the SQL: only our fd does)."""
    extension = source.rsplit(".", 1)[-1].lower()
    path = f"/proc/self/fd/{fd}"
    if extension == "tsv":
        return f"SELECT * FROM read_csv('{path}', delim='\\t')"
    if extension == "jsonl":
        return f"SELECT * FROM read_json('{path}', format='newline_delimited')"
    if extension in _EXCEL:
        sheet = _excel_as_csv(fd, scratch).replace("'", "''")
        return f"SELECT * FROM read_csv('{sheet}')"
    return f"SELECT * FROM read_csv('{path}')"


def _excel_as_csv(fd: int, scratch: Path) -> str:
    """The first sheet as CSV (DuckDB's Excel reader is an extension we cannot download)."""
    from openpyxl import load_workbook  # type: ignore[import-untyped]

    with os.fdopen(os.dup(fd), "rb") as handle:
        book = load_workbook(handle, read_only=True, data_only=True)
        try:
            target = scratch / "sheet.csv"
            with target.open("w", newline="", encoding="utf-8") as out:
                writer = csv.writer(out)
                for row in book.worksheets[0].iter_rows(values_only=True):
                    writer.writerow(["" if cell is None else cell for cell in row])
        finally:
            book.close()
    return str(target)


def _copy_with_progress(connection: Any, statement: str, send: Any) -> int:
    """Run the COPY, reporting its progress; returns the rows it wrote."""
    finished = threading.Event()

    def report() -> None:
        while not finished.wait(PROGRESS_EVERY):
            with contextlib.suppress(Exception):  # no query running at this instant
                percent = float(connection.query_progress())
                if percent >= 0:
                    send("progress", min(percent, 99.0))

    reporter = threading.Thread(target=report, daemon=True)
    reporter.start()
    try:
        written = connection.execute(statement).fetchone()
    finally:
        finished.set()
        reporter.join()
    return int(written[0]) if written else 0


def _human(exc: Exception) -> str:
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if "/proc/self/fd/" in text:
        text = text.split("/proc/self/fd/")[0] + "the file"
    if isinstance(exc, MemoryError) or "Out of Memory" in text:
        return "converting to Parquet needed more memory than the converter may use"
    if "File too large" in text or "No space left" in text:
        floor = DISK_FLOOR // 1024**3
        return f"not enough disk for the Parquet copy (the disk keeps {floor} GB free)"
    return f"could not convert to Parquet: {text[:200]}"
