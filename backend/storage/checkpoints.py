"""Where the agents' LangGraph checkpoints live: beside the store.

SQLite in DATA_DIR by default; with DATABASE_URL=postgresql://... they go to the same
PostgreSQL (`langgraph-checkpoint-postgres`), so every API server sees every thread.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from backend.storage import is_postgres

SETUP_LOCK = 7_013_014  # pg_advisory_lock key: one server creates the tables at a time
POOL_SIZE = 10

Closer = Callable[[], Awaitable[None]]


async def open_checkpointer(
    database_url: str, data_dir: Path
) -> tuple[BaseCheckpointSaver[Any], Closer]:
    """The checkpoint saver, its tables made, and how to close it."""
    if is_postgres(database_url):
        return await _postgres(database_url)
    connection = await aiosqlite.connect(str(data_dir / "agent_checkpoints.sqlite3"))
    saver = AsyncSqliteSaver(connection)
    await saver.setup()
    return saver, connection.close


async def _postgres(url: str) -> tuple[BaseCheckpointSaver[Any], Closer]:
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg import AsyncConnection
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    # What the saver needs of its connections: autocommit, dict rows, no prepared
    # statements (they break behind a transaction-pooling proxy such as PgBouncer).
    options: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    pool: AsyncConnectionPool[Any] = AsyncConnectionPool(
        url, min_size=1, max_size=POOL_SIZE, open=False, kwargs=options, name="checkpoints"
    )
    await pool.open(wait=True)
    saver = AsyncPostgresSaver(pool)
    # Its setup is not safe to run twice at once: servers starting together take turns.
    async with await AsyncConnection.connect(url, autocommit=True) as lock:
        await lock.execute("SELECT pg_advisory_lock(%s)", (SETUP_LOCK,))
        try:
            await saver.setup()
        finally:
            await lock.execute("SELECT pg_advisory_unlock(%s)", (SETUP_LOCK,))
    return saver, pool.close
