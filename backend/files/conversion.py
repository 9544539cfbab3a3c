"""Large tabular uploads get a Parquet copy, made once, in the background.

A CSV, TSV, JSONL or Excel file over `PARQUET_CONVERSION_MB` under uploads/
gets a twin, `<name>.parquet` beside it (`uploads/big.csv` ->
`uploads/big.csv.parquet`). DuckDB reads Parquet many times faster than CSV and
its footer holds the exact schema and row count, so once the twin exists the
catalog describes the file from it and the loaders open it instead.

Conversions run one at a time on a thread of their own, each in a fresh,
resource-limited helper process (`to_parquet.py`) that reports its progress. The
queue takes users in turn (`FairQueue`), so one user's many uploads never make another
wait behind all of them, and a copy is written only within what its owner's disk quota
leaves (the helper cannot write past it).
`status` is what the catalog shows as the file's `conversion`. A twin is
current while it is newer than its source; a source that changes, or a server
that restarts mid-copy (the draft is never listed), is simply converted again
the next time the file is listed.
"""

from __future__ import annotations

import logging
import multiprocessing
import shutil
import threading
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass
from typing import Any, Literal

from backend.files.fair_queue import FairQueue
from backend.files.metadata import file_extension
from backend.files.to_parquet import SCRATCH_PREFIX, convert
from backend.storage.sessions import owner_of
from backend.storage.workspaces import WorkspaceFile, Workspaces

logger = logging.getLogger(__name__)

CONVERTIBLE = frozenset({"csv", "tsv", "jsonl", "xlsx", "xlsm"})
TWIN_SUFFIX = ".parquet"
MEMORY_MB = 1024  # DuckDB's memory_limit in the helper; it spills beyond

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


@dataclass
class _Job:
    session_id: str
    source: WorkspaceFile
    conversion: Conversion


class ParquetConversions:
    """The queue of conversions and their status, for one server."""

    def __init__(
        self,
        workspaces: Workspaces,
        threshold_bytes: int,
        memory_mb: int = MEMORY_MB,
        quota_left: Callable[[str], int] | None = None,
    ) -> None:
        """`quota_left(session key)`: bytes its owner's disk quota leaves (None: no quota)."""
        self.workspaces = workspaces
        self.threshold = threshold_bytes
        self.memory_mb = memory_mb
        self.quota_left = quota_left
        self._jobs: dict[_Key, tuple[tuple[int, float], Conversion]] = {}
        self._queue: FairQueue[_Job] = FairQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._process: multiprocessing.process.BaseProcess | None = None
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
        self, session_id: str, found: WorkspaceFile, twin: WorkspaceFile | None
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

    def forget_session(self, session_id: str) -> None:
        """Drop the session's conversions and kill its running one (a deleted session), so
        no copy lands in a workspace being deleted."""
        with self._lock:
            for key in [key for key in self._jobs if key[0] == session_id]:
                del self._jobs[key]
            process = self._process if self._running == session_id else None
        if process is not None:
            process.kill()
            process.join()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="parquet", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        while (job := self._queue.get()) is not None:
            try:
                self._run(job)
            except Exception as exc:  # the helper could not even start
                logger.exception("Parquet conversion of %s failed", job.source.path)
                job.conversion.state, job.conversion.error = "failed", str(exc)

    def _run(self, job: _Job) -> None:
        conversion = job.conversion
        quota_left = -1 if self.quota_left is None else self.quota_left(job.session_id)
        if self.quota_left is not None and quota_left <= 0:
            conversion.state = "failed"
            conversion.error = "your disk quota has no room left for the Parquet copy"
            return
        context = multiprocessing.get_context("spawn")  # forking would copy the server's threads
        receiver, sender = context.Pipe(duplex=False)
        identity = (job.source.size, job.source.modified)
        process = context.Process(
            target=convert,
            args=(
                str(self.workspaces.root.parent),
                job.session_id,
                job.source.path,
                conversion.parquet,
                identity,
                self.memory_mb,
                quota_left,
                sender,
            ),
            name="parquet-helper",
            daemon=True,
        )
        with self._lock:
            current = self._jobs.get((job.session_id, job.source.path))
            if self._closed or current is None or current[1] is not conversion:
                return  # the session was deleted, or the file replaced, while it waited
            process.start()
            self._process = process
            self._running = job.session_id
        sender.close()
        conversion.state = "converting"
        try:
            self._follow(receiver, conversion)
        finally:
            receiver.close()
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
                process.join()
            with self._lock:
                self._process = self._running = None
        logger.info(
            "Parquet copy of %s: %s%s",
            job.source.path,
            conversion.state,
            f" ({conversion.error})" if conversion.error else "",
        )

    @staticmethod
    def _follow(receiver: Any, conversion: Conversion) -> None:
        while True:
            try:
                kind, value = receiver.recv()
            except EOFError:  # killed: out of memory or CPU, or the server is stopping
                conversion.state = "failed"
                conversion.error = "the converter stopped before the end"
                return
            if kind == "progress":
                conversion.progress = round(float(value), 1)
            elif kind == "done":
                conversion.state, conversion.progress = "done", 100.0
                return
            else:
                conversion.state, conversion.error = "failed", str(value)
                return

    def close(self) -> None:
        """Stop: the running helper is killed (its draft is never listed) and the queue dropped."""
        with self._lock:
            self._closed = True
            process = self._process
        if process is not None and process.is_alive():
            process.kill()
        if self._thread is not None:
            self._queue.close()
            self._thread.join(timeout=10)
