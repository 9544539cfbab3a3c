"""The driver protocols `SQLStore` and its row mixins are written against: a `Database`
(SQLite or PostgreSQL) hands out `Connection`s whose statements return `Cursor`s.

A leaf module: the adapters (`sqlite.py`, `postgres.py`) implement it, and everything
that runs SQL imports it, so no row mixin needs the store that combines them.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from backend.storage.migrations import Dialect


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    def execute(self, sql: str, params: tuple[Any, ...] = (), /) -> Cursor:
        """Run one statement; rows read by column name (`row["id"]`)."""
        ...


class Database(Protocol):
    dialect: Dialect
    integrity_errors: tuple[type[Exception], ...]  # a broken UNIQUE or FOREIGN KEY

    def transaction(self) -> AbstractContextManager[Connection]:
        """A write transaction: committed on exit, rolled back on any error. Its
        failures are `StoreBusy` or `StoreFull` where that is what they mean."""
        ...

    def reading(self) -> AbstractContextManager[Connection]:
        """A connection for reads (a consistent snapshot is not promised)."""
        ...

    def schema_lock(self, db: Connection) -> None:
        """Serialise migrations between processes, for the rest of the transaction."""
        ...

    def legacy_version(self, db: Connection) -> int:
        """The schema version of a database from before `schema_version` existed."""
        ...

    def close(self) -> None: ...
