"""PostgreSQL behind `SQLStore` (DATABASE_URL=postgresql://...), for several API servers.

A psycopg 3 connection pool serves the event loop's threads; every call checks out a
connection, runs one transaction and gives it back (committed, or rolled back on an
error). A lock held by someone else is waited for up to `LOCK_TIMEOUT_MS`, then it is
`StoreBusy`; a database that cannot be reached is `StoreUnavailable` (both 503). The
migrations run under an advisory lock, so servers starting together apply them once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import psycopg.errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from backend.config import ConfigError
from backend.storage.base import StoreBusy, StoreFull, StoreUnavailable
from backend.storage.database import Connection, Cursor
from backend.storage.migrations import POSTGRESQL
from backend.storage.sql_store import SQLStore

LOCK_TIMEOUT_MS = 15_000
CONNECT_TIMEOUT = 10  # seconds, for each new connection
POOL_TIMEOUT = 15.0  # seconds a call waits for a free connection
POOL_SIZE = 10
MIGRATION_LOCK = 7_013_013  # pg_advisory_xact_lock key: one migrating server at a time


class PostgresDatabase:
    dialect = POSTGRESQL
    integrity_errors: tuple[type[Exception], ...] = (psycopg.IntegrityError,)

    def __init__(
        self, url: str, *, pool_size: int = POOL_SIZE, lock_timeout_ms: int = LOCK_TIMEOUT_MS
    ) -> None:
        self.where = describe(url)
        _check_reachable(url, self.where)
        self._pool: ConnectionPool[psycopg.Connection[dict[str, Any]]] = ConnectionPool(
            url,
            min_size=1,
            max_size=pool_size,
            open=False,
            timeout=POOL_TIMEOUT,
            check=ConnectionPool.check_connection,  # a restarted server's dead connections
            kwargs={
                "row_factory": dict_row,
                "connect_timeout": CONNECT_TIMEOUT,
                "options": f"-c lock_timeout={lock_timeout_ms}",
            },
            name="store",
        )
        self._pool.open(wait=True, timeout=CONNECT_TIMEOUT)

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        with _errors(self.where), self._pool.connection() as connection:
            yield _Placeholders(connection)

    reading = transaction

    def schema_lock(self, db: Connection) -> None:
        db.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))

    def legacy_version(self, db: Connection) -> int:
        return 0  # PostgreSQL databases started with `schema_version`

    def close(self) -> None:
        self._pool.close()


class PostgresStore(SQLStore):
    def __init__(self, url: str) -> None:
        super().__init__(PostgresDatabase(url))


class _Placeholders:
    """A connection that takes the store's `?` placeholders (psycopg's are `%s`)."""

    def __init__(self, connection: psycopg.Connection[dict[str, Any]]) -> None:
        self._connection = connection

    def execute(self, sql: str, params: tuple[Any, ...] = (), /) -> Cursor:
        return self._connection.execute(sql.replace("?", "%s"), params or None)


def describe(url: str) -> str:
    """`user@host:port/db` from a connection URL: never the password."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        raise ConfigError("DATABASE_URL: not a valid PostgreSQL connection URL") from None
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = parts.get("host") or "localhost"
    return f"{user}{host}:{parts.get('port') or 5432}/{parts.get('dbname') or ''}"


def _check_reachable(url: str, where: str) -> None:
    """Fail start-up with the server's own reason (refused, bad password), in one line."""
    try:
        psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT).close()
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split())
        if password := _password(url):
            reason = reason.replace(password, "***")
        raise ConfigError(
            f"DATABASE_URL: cannot connect to PostgreSQL at {where}: {reason}"
        ) from None


def _password(url: str) -> str:
    return str(conninfo_to_dict(url).get("password") or "")


@contextmanager
def _errors(where: str) -> Iterator[None]:
    try:
        yield
    except (psycopg.errors.LockNotAvailable, psycopg.errors.QueryCanceled) as exc:
        raise StoreBusy(str(exc)) from None
    except PoolTimeout:
        raise StoreBusy(f"no free connection to {where} in {POOL_TIMEOUT:g} s") from None
    except psycopg.errors.DiskFull as exc:
        raise StoreFull(str(exc)) from None
    except psycopg.OperationalError as exc:
        raise StoreUnavailable(f"PostgreSQL at {where}: {' '.join(str(exc).split())}") from None
