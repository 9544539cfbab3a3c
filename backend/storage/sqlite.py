"""SQLite behind `SQLStore`: the default, one file in DATA_DIR.

WAL mode with `synchronous=NORMAL`: a committed transaction is in the WAL file
before `add_message` returns, so it survives a `kill -9` of the server (only an
OS crash or power cut can lose the last transactions). Calls are short and
serialised by a lock, so one connection serves the event loop and worker threads.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from backend.storage.base import StoreBusy, StoreFull
from backend.storage.database import Connection
from backend.storage.migrations import SQLITE
from backend.storage.sql_store import SQLStore

BUSY_TIMEOUT_MS = 15_000


class SQLiteDatabase:
    dialect = SQLITE
    integrity_errors: tuple[type[Exception], ...] = (sqlite3.IntegrityError,)

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        # Another process holding the database (a backup, the sqlite3 shell) is waited for;
        # past this, `StoreBusy` (503) instead of a 500.
        self._db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """Hold the lock for one transaction; a failure rolls it back, never leaves it open."""
        with self._lock, _busy():
            self._db.execute("BEGIN IMMEDIATE")  # wait for the write lock here, not mid-way
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):  # also after a COMMIT that failed
                    self._db.execute("ROLLBACK")
                raise

    @contextmanager
    def reading(self) -> Iterator[Connection]:
        with self._lock, _busy():
            yield self._db

    def schema_lock(self, db: Connection) -> None:
        """Nothing to do: BEGIN IMMEDIATE already keeps other writers out."""

    def legacy_version(self, db: Connection) -> int:
        return int(db.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class SQLiteStore(SQLStore):
    def __init__(self, path: Path) -> None:
        super().__init__(SQLiteDatabase(path))


@contextmanager
def _busy() -> Iterator[None]:
    """SQLite's "database is locked" (after BUSY_TIMEOUT_MS) as `StoreBusy`, and its
    "database or disk is full" as `StoreFull`; the transaction is rolled back either way."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise StoreBusy(str(exc)) from None
        if "full" in str(exc):
            raise StoreFull(str(exc)) from None
        raise
