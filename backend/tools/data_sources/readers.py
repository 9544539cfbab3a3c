"""The connections the server holds to data sources, and the helper that reads files.

A query takes a connection of its source (a new one if none is idle) and gives it back
when done; at most MAX_IDLE stay open per source, each for at most IDLE_SECONDS, and
none outlives a change of the source's address or password (the key says which). A
connection that failed is closed, never given back.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass, field
from typing import Protocol

from backend.files.isolation import Confine, IsolatedRunner
from backend.tools.data_sources.catalog import Catalog, Table
from backend.tools.data_sources.query import QueryLimits, Rows, SourceAddress

MAX_IDLE = 2
IDLE_SECONDS = 300.0


class SourceConnection(Protocol):
    broken: bool

    def query(self, sql: str, limits: QueryLimits) -> Rows: ...

    def end(self) -> None: ...

    def cancel(self) -> None: ...

    def check_account(self) -> None: ...

    def catalog(self, max_tables: int) -> Catalog: ...

    def samples(self, table: Table, seconds: float) -> Table: ...

    def close(self) -> None: ...


def _fingerprint(source_id: str, address: SourceAddress) -> str:
    parts = [source_id, address.kind, address.host, str(address.port), address.database]
    parts += [address.username, address.password, str(address.path or "")]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


@dataclass
class _Idle:
    connection: SourceConnection
    since: float = field(default_factory=time.monotonic)


class SourceReaders:
    """Opens, lends and keeps connections to sources; call from worker threads."""

    def __init__(self, confine: Confine | None, file_timeout: float) -> None:
        self._lock = threading.Lock()
        self._idle: dict[str, list[_Idle]] = {}
        self._runners: list[IsolatedRunner] = []
        self.confine = confine
        self.file_timeout = file_timeout

    def _runner(self) -> IsolatedRunner:
        with self._lock:
            if self._runners:
                return self._runners.pop()
        return IsolatedRunner(timeout=self.file_timeout, confine=self.confine)

    def take(self, source_id: str, address: SourceAddress) -> SourceConnection:
        """An open connection to the source (QueryFailed if it cannot be reached)."""
        key = _fingerprint(source_id, address)
        now = time.monotonic()
        stale = []
        taken = None
        with self._lock:
            idle = self._idle.get(key, [])
            while idle and taken is None:
                held = idle.pop()
                if now - held.since > IDLE_SECONDS:
                    stale.append(held.connection)
                else:
                    taken = held.connection
        for connection in stale:
            connection.close()
        if taken is not None:
            return taken
        if address.kind == "postgresql":
            from backend.tools.data_sources.postgres import PostgresSource

            return PostgresSource(address)
        if address.kind == "mysql":
            from backend.tools.data_sources.mysql import MySqlSource

            return MySqlSource(address)
        from backend.tools.data_sources.files import FileSource

        return FileSource(address, self._runner())

    def give_back(
        self, source_id: str, address: SourceAddress, connection: SourceConnection
    ) -> None:
        from backend.tools.data_sources.files import FileSource

        if isinstance(connection, FileSource):
            with self._lock:
                self._runners.append(connection.runner)
            return
        if connection.broken:
            connection.close()
            return
        key = _fingerprint(source_id, address)
        with self._lock:
            idle = self._idle.setdefault(key, [])
            if len(idle) < MAX_IDLE:
                idle.append(_Idle(connection))
                return
        connection.close()

    def close(self) -> None:
        with self._lock:
            idle = [held.connection for kept in self._idle.values() for held in kept]
            runners, self._runners = self._runners, []
            self._idle.clear()
        for connection in idle:
            connection.close()
        for runner in runners:
            runner.close()
