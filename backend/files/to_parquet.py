"""One Parquet copy of a tabular workspace file, written by DuckDB `COPY` in a helper process.

This is the helper's side (`conversion.py` starts it and reads its reports), never the
server: the file is untrusted and a 20 GB CSV takes minutes. Its arguments are fixed
(`main`): the memory DuckDB may use, the bytes it may write, the source's extension and
three descriptors the server opened for it: the source (read-only), the draft the copy
goes to, and the pipe its reports go back on. It is handed no path of the server's:
DuckDB reads `/proc/self/fd/N`, writes the draft the same way, and spills to its working
folder (a scratch folder of its own). It gets no environment to speak of, runs at nice 10
within rlimits, and reports as JSON lines (`conversion_reports.py`): its progress, then
"done" or "failed". The server commits the draft, or not.
"""

from __future__ import annotations

import contextlib
import csv
import os
import resource
import signal
import sys
import threading
from typing import Any

from backend.files.conversion_reports import Reports
from backend.storage.workspaces import DISK_FLOOR

PROGRESS_EVERY = 0.5  # seconds between progress messages
CPU_LIMIT = 6 * 3600  # seconds; a copy is a single pass, far below this
NICE = 10  # as the sandboxes: below the server that answers everyone
_EXCEL = ("xlsx", "xlsm")


def main() -> None:
    """argv: our code's folder, then memory MB, the room in bytes, the source's extension,
    and the source's, the draft's and the report pipe's descriptors."""
    memory_mb, room = int(sys.argv[2]), int(sys.argv[3])
    extension = sys.argv[4]
    source_fd, draft_fd, report_fd = (int(value) for value in sys.argv[5:8])
    os.nice(NICE)
    _limit(memory_mb, room)
    reports = Reports(report_fd)
    try:
        rows = _convert(source_fd, draft_fd, extension, memory_mb, reports)
    except Exception as exc:  # every failure is the file's status, not a crash
        reports.send("failed", error=_human(exc))
    else:
        reports.send("done", rows=rows)


def _limit(memory_mb: int, room: int) -> None:
    memory = (memory_mb + 2048) * 1024**2  # DuckDB maps more than it uses
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT, CPU_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Written files stop at the disk floor and the owner's quota; the write fails (EFBIG)
    # instead of killing us.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (max(room, 1), max(room, 1)))


def _convert(source_fd: int, draft_fd: int, extension: str, memory_mb: int, reports: Any) -> int:
    import duckdb  # after the limits: its allocator sees them

    scratch = os.getcwd()
    connection = duckdb.connect(
        config={"memory_limit": f"{memory_mb}MB", "temp_directory": scratch}
    )
    connection.execute("SET enable_progress_bar = true")  # query_progress needs it
    connection.execute("SET enable_progress_bar_print = false")
    query = _reader(extension, source_fd, scratch)
    target = f"/proc/self/fd/{draft_fd}"
    statement = f"COPY ({query}) TO '{target}' (FORMAT parquet, USE_TMP_FILE false)"
    rows = _copy_with_progress(connection, statement, reports)
    connection.close()
    return rows


def _reader(extension: str, fd: int, scratch: str) -> str:
    """The SELECT that reads the source (no path of the server's enters the SQL: our fd does)."""
    path = f"/proc/self/fd/{fd}"
    if extension == "csv":
        return f"SELECT * FROM read_csv('{path}')"
    if extension == "tsv":
        return f"SELECT * FROM read_csv('{path}', delim='\\t')"
    if extension == "jsonl":
        return f"SELECT * FROM read_json('{path}', format='newline_delimited')"
    if extension in _EXCEL:
        sheet = _excel_as_csv(fd, scratch).replace("'", "''")
        return f"SELECT * FROM read_csv('{sheet}')"
    raise ValueError(f"no reader for .{extension[:20]} files")


def _excel_as_csv(fd: int, scratch: str) -> str:
    """The first sheet as CSV (DuckDB's Excel reader is an extension we cannot download)."""
    from openpyxl import load_workbook  # type: ignore[import-untyped]

    with os.fdopen(os.dup(fd), "rb") as handle:
        book = load_workbook(handle, read_only=True, data_only=True)
        try:
            target = os.path.join(scratch, "sheet.csv")
            with open(target, "w", newline="", encoding="utf-8") as out:
                writer = csv.writer(out)
                for row in book.worksheets[0].iter_rows(values_only=True):
                    writer.writerow(["" if cell is None else cell for cell in row])
        finally:
            book.close()
    return target


def _copy_with_progress(connection: Any, statement: str, reports: Any) -> int:
    """Run the COPY, reporting its progress; returns the rows it wrote."""
    finished = threading.Event()

    def report() -> None:
        while not finished.wait(PROGRESS_EVERY):
            with contextlib.suppress(Exception):  # no query running at this instant
                percent = float(connection.query_progress())
                if percent >= 0:
                    reports.send("progress", percent=min(percent, 99.0))

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
