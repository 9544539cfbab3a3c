"""Large tabular uploads get a Parquet copy, made once, in the background.

A CSV, TSV, JSONL or Excel file over `PARQUET_CONVERSION_MB` under uploads/
gets a twin, `<name>.parquet` beside it (`uploads/big.csv` ->
`uploads/big.csv.parquet`). DuckDB reads Parquet many times faster than CSV and
its footer holds the exact schema and row count, so once the twin exists the
catalog describes the file from it and the loaders open it instead.

Conversions run one at a time on a thread of their own, each in a fresh helper process
(`to_parquet.py`): the file is hostile, and DuckDB's CSV reader or openpyxl may be taken
over by it. So the helper gets fixed arguments, a minimal environment and no path of the
server's: this thread opens the source (no link followed) and the draft of its copy and
hands them over as descriptors, with a scratch folder for DuckDB's spill as its working
folder. With `confine` (the sandbox's `helper_command`) it runs in bubblewrap: no network,
no file of the server's but our code and the Python runtime, read-only, and of DATA_DIR
only that scratch folder. Without bubblewrap (SANDBOX=none) it runs with rlimits only.
Either way it writes no more than its owner's quota and the disk floor leave
(RLIMIT_FSIZE), at nice 10, and reports its progress as JSON lines that are checked here
(`conversion_reports.py`): anything else fails the conversion, and nothing it sends is
ever unpickled. The copy is committed here, once the helper says it is complete and the
source is still the file it was.

The queue takes users in turn (`FairQueue`), so one user's many uploads never make another
wait behind all of them. `status` is what the catalog shows as the file's `conversion`. A
twin is current while it is newer than its source; a source that changes, or a server that
restarts mid-copy (the draft is never listed), is simply converted again the next time the
file is listed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from backend.files.conversion_reports import read_report, report_lines
from backend.files.fair_queue import FairQueue
from backend.files.isolation import SANDBOX_CODE, SOURCE_ROOT, Confine
from backend.files.model import file_extension
from backend.storage.sessions import SessionKey, owner_of
from backend.storage.workspaces import NotARegularFile, UnsafePath, WorkspaceFile, Workspaces

logger = logging.getLogger(__name__)

CONVERTIBLE = frozenset({"csv", "tsv", "jsonl", "xlsx", "xlsm"})
TWIN_SUFFIX = ".parquet"
MEMORY_MB = 1024  # DuckDB's memory_limit in the helper; it spills beyond
SCRATCH_PREFIX = "parquet-"  # the helper's scratch folders (DuckDB's spill), in DATA_DIR
EXIT_WAIT = 5.0  # seconds the helper has to exit after its last report
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); from backend.files.to_parquet import main; main()"
)
_ENVIRONMENT = {"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}
_MISBEHAVED = "the converter sent a report it may not send"
_STOPPED = "the converter stopped before the end"

State = Literal["queued", "converting", "done", "failed"]
_Key = tuple[str, str]


@dataclass
class Conversion:
    """One file's conversion, as the API shows it (`details.conversion`)."""

    state: State
    progress: float  # percent
    parquet: str
    error: str | None = None

    def public(self) -> dict[str, Any]:
        return asdict(self)


def twin_of(path: str) -> str:
    return path + TWIN_SUFFIX


def source_of_twin(path: str, listed: Collection[str]) -> str | None:
    """The file `path` is the Parquet copy of, if it is one and its source is listed."""
    source = path.removesuffix(TWIN_SUFFIX)
    if source != path and source in listed and file_extension(source) in CONVERTIBLE:
        return source
    return None


def follow(lines: Iterable[bytes], conversion: Conversion) -> bool:
    """Apply the helper's reports to `conversion`; True once it says the copy is complete
    (the draft is then the server's to commit), False once it failed (state "failed")."""
    for line in lines:
        try:
            kind, value = read_report(line)
        except ValueError:
            conversion.state, conversion.error = "failed", _MISBEHAVED
            return False
        if kind == "progress":
            conversion.progress = round(min(max(value, 0.0), 99.0), 1)
        elif kind == "done":
            return True
        else:
            conversion.state, conversion.error = "failed", value
            return False
    conversion.state, conversion.error = "failed", _STOPPED  # killed: memory, CPU, a stop
    return False


@dataclass
class _Job:
    session_id: SessionKey
    source: WorkspaceFile
    conversion: Conversion


class ParquetConversions:
    """The queue of conversions and their status, for one server."""

    def __init__(
        self,
        workspaces: Workspaces,
        threshold_bytes: int,
        memory_mb: int = MEMORY_MB,
        quota_left: Callable[[SessionKey], int] | None = None,
        confine: Confine | None = None,
    ) -> None:
        """`quota_left(session key)`: bytes its owner's disk quota leaves (None: no quota).
        `confine`: the sandbox's `helper_command`, to run the helper in bubblewrap."""
        self.workspaces = workspaces
        self.threshold = threshold_bytes
        self.memory_mb = memory_mb
        self.quota_left = quota_left
        self.confine = confine
        self._jobs: dict[_Key, tuple[tuple[int, float], Conversion]] = {}
        self._queue: FairQueue[_Job] = FairQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.process: subprocess.Popen[bytes] | None = None  # the running helper
        self._running: str | None = None  # the session whose file the helper converts
        self._closed = False
        for leftover in workspaces.root.parent.glob(f"{SCRATCH_PREFIX}*"):
            shutil.rmtree(leftover, ignore_errors=True)  # a helper killed with the server

    def wanted(self, found: WorkspaceFile) -> bool:
        return (
            self.threshold > 0
            and found.size > self.threshold
            and found.path.startswith("uploads/")
            and file_extension(found.path) in CONVERTIBLE
        )

    def status(
        self, session_id: SessionKey, found: WorkspaceFile, twin: WorkspaceFile | None
    ) -> Conversion | None:
        """The conversion of `found` (queued now if it is due); None for a file not converted."""
        if not self.wanted(found):
            return None
        parquet = twin_of(found.path)
        if twin is not None and twin.modified >= found.modified:
            return Conversion("done", 100.0, parquet)
        identity = (found.size, found.modified)
        key = (session_id, found.path)
        with self._lock:
            known = self._jobs.get(key)
            if known is not None and known[0] == identity and known[1].state != "done":
                return known[1]
            if self._closed:
                return None
            conversion = Conversion("queued", 0.0, parquet)
            self._jobs[key] = (identity, conversion)
            self._start()
        self._queue.put(owner_of(session_id), _Job(session_id, found, conversion))
        return conversion

    def forget_session(self, session_id: SessionKey) -> None:
        """Drop the session's conversions and kill its running one (a deleted session), so
        no copy lands in a workspace being deleted."""
        with self._lock:
            for key in [key for key in self._jobs if key[0] == session_id]:
                del self._jobs[key]
            process = self.process if self._running == session_id else None
        if process is not None:
            process.kill()
            process.wait()

    def _start(self) -> None:
        if self._thread is None:
            # bubblewrap's --die-with-parent ties each helper to the thread that started
            # it: this one, which lives as long as the queue.
            self._thread = threading.Thread(target=self._work, name="parquet", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        while (job := self._queue.get()) is not None:
            try:
                self._run(job)
            except Exception as exc:  # the helper could not even start
                logger.exception("Parquet conversion of %s failed", job.source.path)
                job.conversion.state, job.conversion.error = "failed", str(exc)

    def _current(self, job: _Job) -> bool:
        """Whether `job` is still wanted (the caller holds the lock)."""
        current = self._jobs.get((job.session_id, job.source.path))
        return not self._closed and current is not None and current[1] is job.conversion

    def _run(self, job: _Job) -> None:
        conversion = job.conversion
        quota_left = None if self.quota_left is None else self.quota_left(job.session_id)
        if quota_left is not None and quota_left <= 0:
            conversion.state = "failed"
            conversion.error = "your disk quota has no room left for the Parquet copy"
            return
        with self._lock:
            if not self._current(job):
                return  # the session was deleted, or the file replaced, while it waited
        identity = (job.source.size, job.source.modified)
        with contextlib.ExitStack() as stack:
            try:
                source = stack.enter_context(
                    self.workspaces.open_file(job.session_id, job.source.path)
                )
            except (OSError, UnsafePath, NotARegularFile):
                conversion.state = "failed"
                conversion.error = "could not convert to Parquet: the file is not a plain file"
                return
            if _identity(source.fileno()) != identity:
                conversion.state = "failed"
                conversion.error = "the file changed before its conversion started"
                return
            room = self.workspaces.room(job.session_id)
            if quota_left is not None:  # the copy is written in the owner's workspace
                room = min(room, quota_left)
            draft = self.workspaces.draft(job.session_id, conversion.parquet)
            stack.callback(draft.abort)  # nothing once committed
            scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=self.workspaces.root.parent))
            stack.callback(shutil.rmtree, scratch, ignore_errors=True)
            reports, writer = os.pipe()
            stack.callback(os.close, reports)
            try:
                extension = file_extension(job.source.path)
                process = self._spawn(scratch, room, extension, (source.fileno(), draft.fd, writer))
            finally:
                os.close(writer)
            complete = self._follow(job, process, reports)
            if complete and _identity(source.fileno()) != identity:
                conversion.state = "failed"
                conversion.error = "the file changed during its conversion"
            elif complete:
                os.fsync(draft.fd)  # the slow part of a durable commit, outside the lock
                with self._lock:
                    if self._current(job):
                        draft.commit(durable=True)
                        conversion.state, conversion.progress = "done", 100.0
        logger.info(
            "Parquet copy of %s: %s%s",
            job.source.path,
            conversion.state,
            f" ({conversion.error})" if conversion.error else "",
        )

    def _spawn(
        self, scratch: Path, room: int, extension: str, fds: tuple[int, int, int]
    ) -> subprocess.Popen[bytes]:
        """The helper, on the source's, the draft's and the report pipe's descriptors."""
        arguments = [str(self.memory_mb), str(room), extension, *(str(fd) for fd in fds)]
        if self.confine is None:
            argv = [sys.executable, "-I", "-c", _BOOT, str(SOURCE_ROOT), *arguments]
        else:
            code = [(SOURCE_ROOT / "backend", f"{SANDBOX_CODE}/backend")]
            argv = self.confine(
                [sys.executable, "-I", "-c", _BOOT, SANDBOX_CODE, *arguments], code, scratch=scratch
            )
        return subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=fds,
            cwd=scratch,
            env=_ENVIRONMENT,
            start_new_session=True,
        )

    def _follow(self, job: _Job, process: subprocess.Popen[bytes], reports: int) -> bool:
        """Follow the helper to its end; True if it completed the copy and exited 0."""
        conversion = job.conversion
        with self._lock:
            self.process, self._running = process, job.session_id
            if not self._current(job):  # deleted, or the server stopping, as it started
                process.kill()
        conversion.state = "converting"
        try:
            complete = follow(report_lines(reports, process), conversion)
        finally:
            try:
                process.wait(timeout=EXIT_WAIT)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            with self._lock:
                self.process = self._running = None
        if complete and process.returncode != 0:
            conversion.state, conversion.error = "failed", _STOPPED
            return False
        return complete

    def close(self) -> None:
        """Stop: the running helper is killed (its draft is never listed) and the queue dropped."""
        with self._lock:
            self._closed = True
            process = self.process
        if process is not None:
            process.kill()
        if self._thread is not None:
            self._queue.close()
            self._thread.join(timeout=10)


def _identity(fd: int) -> tuple[int, float]:
    info = os.fstat(fd)
    return info.st_size, info.st_mtime
