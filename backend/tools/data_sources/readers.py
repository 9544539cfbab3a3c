"""The connections the server holds to data sources, and the helper that reads files.

A query takes a connection of its source (a new one if none is idle) and gives it back
when done; at most MAX_IDLE stay open per source, each for at most IDLE_SECONDS (each
`take` closes those past it, whichever source they are of), and none is reused after a
change of the source's address or password (the key says which). A connection that
failed is closed, never given back.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from backend.files.isolation import Confine, IsolatedRunner
from backend.tools.data_sources.catalog import Catalog, Table
from backend.tools.data_sources.files import FileSource, confined_to
from backend.tools.data_sources.mysql import MySqlSource
from backend.tools.data_sources.postgres import PostgresSource
from backend.tools.data_sources.query import QueryLimits, Rows, SourceAddress

MAX_IDLE = 2
MAX_HELPERS = 8  # file sources' helper processes kept running
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
        # A file source's helper, by its folder; the least recently used past MAX_HELPERS
        # is stopped (the next query starts it again).
        self._helpers: OrderedDict[Path, IsolatedRunner] = OrderedDict()
        self.confine = confine
        self.file_timeout = file_timeout

    def _runner(self, folder: Path) -> IsolatedRunner:
        with self._lock:
            runner = self._helpers.get(folder)
            if runner is None:
                runner = IsolatedRunner(
                    timeout=self.file_timeout, confine=confined_to(folder, self.confine)
                )
                self._helpers[folder] = runner
            self._helpers.move_to_end(folder)
            stopped = []
            while len(self._helpers) > MAX_HELPERS:
                stopped.append(self._helpers.popitem(last=False)[1])
        for old in stopped:
            old.close()
        return runner

    def take(self, source_id: str, address: SourceAddress) -> SourceConnection:
        """An open connection to the source (QueryFailed if it cannot be reached)."""
        key = _fingerprint(source_id, address)
        now = time.monotonic()
        stale = []
        taken = None
        with self._lock:
            # Every source's, not only this one's: a changed or deleted source's are
            # never taken again.
            for held_key, idle in list(self._idle.items()):
                stale += [held.connection for held in idle if now - held.since > IDLE_SECONDS]
                idle[:] = [held for held in idle if now - held.since <= IDLE_SECONDS]
                if not idle:
                    del self._idle[held_key]
            idle = self._idle.get(key, [])
            if idle:
                taken = idle.pop().connection
        for connection in stale:
            connection.close()
        if taken is not None:
            return taken
        if address.kind == "postgresql":
            return PostgresSource(address)
        if address.kind == "mysql":
            return MySqlSource(address)
        assert address.path is not None
        return FileSource(address, self._runner(address.path.parent))

    def give_back(
        self, source_id: str, address: SourceAddress, connection: SourceConnection
    ) -> None:
        if isinstance(connection, FileSource):
            return  # its helper stays, for the source's next query
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

    def forget(self, folder: Path) -> None:
        """A deleted file source: its helper stops now."""
        with self._lock:
            runner = self._helpers.pop(folder, None)
        if runner is not None:
            runner.close()

    def close(self) -> None:
        with self._lock:
            idle = [held.connection for kept in self._idle.values() for held in kept]
            runners = list(self._helpers.values())
            self._helpers.clear()
            self._idle.clear()
        for connection in idle:
            connection.close()
        for runner in runners:
            runner.close()
