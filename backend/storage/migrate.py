"""Copy a SQLite DATA_DIR's database into PostgreSQL: `python -m backend.storage.migrate`.

    python -m backend.storage.migrate --data-dir ./data --to postgresql://USER:PASSWORD@HOST/DB

Copies the users, conversations and messages (with their ids, so links keep working)
and the agents' checkpoints. The target must be empty: the copy is all or nothing, and
running it twice is refused. Stop the server first; the source is held locked while
it is read. Workspaces, the secret key and the logs stay in DATA_DIR (docs/scale-out.md
says where they go on several machines). Defaults come from DATA_DIR and DATABASE_URL.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import psycopg

from backend.config import ConfigError, load_settings
from backend.storage import is_postgres
from backend.storage.checkpoints import open_checkpointer
from backend.storage.migrations import NUMBERED, TABLES
from backend.storage.postgres import PostgresStore, describe
from backend.storage.sqlite import SQLiteStore

CHECKPOINTS = "agent_checkpoints.sqlite3"


class NotEmpty(Exception):
    """The target already holds data; copying into it could mix two servers' histories."""


def copy_store(source: Path, url: str) -> dict[str, int]:
    """Users, conversations and messages, in one transaction; rows copied per table."""
    SQLiteStore(source).close()  # bring the source to the current schema first
    PostgresStore(url).close()  # and the target
    copied: dict[str, int] = {}
    reader = sqlite3.connect(source, isolation_level=None)
    reader.row_factory = sqlite3.Row
    try:
        reader.execute("BEGIN IMMEDIATE")  # a server still running cannot write meanwhile
        with psycopg.connect(url) as target, target.transaction():
            for table in TABLES:
                if target.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
                    raise NotEmpty(f"{describe(url)} already has {table}: copy into an empty one")
            for table in TABLES:
                rows = reader.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
                copied[table] = len(rows)
                if not rows:
                    continue
                columns = list(rows[0].keys())
                marks = ", ".join(["%s"] * len(columns))
                with target.cursor() as cursor:
                    cursor.executemany(
                        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                        [tuple(row) for row in rows],
                    )
            for table in NUMBERED:  # new rows number on from the copied ids
                target.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                    f" (SELECT COALESCE(max(id), 0) + 1 FROM {table}), false)"
                )
    finally:
        reader.close()
    return copied


async def copy_checkpoints(source: Path, url: str) -> int:
    """Every checkpoint of every thread, oldest first, with its pending writes."""
    reader, close_reader = await open_checkpointer("", source.parent)
    writer, close_writer = await open_checkpointer(url, source.parent)
    try:
        async for _ in writer.alist(None, limit=1):
            raise NotEmpty(f"{describe(url)} already has agent checkpoints")
        checkpoints = [found async for found in reader.alist(None)]
        checkpoints.sort(key=lambda found: found.checkpoint["id"])  # ids grow with time
        for found in checkpoints:
            configurable = found.config["configurable"]
            parent = found.parent_config or {
                "configurable": {
                    "thread_id": configurable["thread_id"],
                    "checkpoint_ns": configurable.get("checkpoint_ns", ""),
                }
            }
            # Every channel's version: the target stores each value once, as the source has it.
            versions = dict(found.checkpoint["channel_versions"])
            saved = await writer.aput(parent, found.checkpoint, found.metadata, versions)
            writes: dict[str, list[tuple[str, Any]]] = defaultdict(list)
            for task_id, channel, value in found.pending_writes or []:
                writes[task_id].append((channel, value))
            for task_id, task_writes in writes.items():
                await writer.aput_writes(saved, task_writes, task_id)
        return len(checkpoints)
    finally:
        await close_reader()
        await close_writer()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m backend.storage.migrate",
        description="Copy a SQLite DATA_DIR's database into an empty PostgreSQL database.",
    )
    parser.add_argument("--data-dir", type=Path, help="the SQLite DATA_DIR (default: DATA_DIR)")
    parser.add_argument(
        "--to", help="postgresql://USER:PASSWORD@HOST:PORT/DB (default: DATABASE_URL)"
    )
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
        data_dir = args.data_dir or settings.DATA_DIR
        url = args.to or settings.DATABASE_URL
        if not is_postgres(url):
            raise ConfigError("--to (or DATABASE_URL) must be a postgresql:// URL")
        if not (data_dir / "app.db").is_file():
            raise ConfigError(f"--data-dir: no app.db in {data_dir}")
        copied = copy_store(data_dir / "app.db", url)
        checkpoints = data_dir / CHECKPOINTS
        copied["checkpoints"] = (
            asyncio.run(copy_checkpoints(checkpoints, url)) if checkpoints.is_file() else 0
        )
    except (ConfigError, NotEmpty) as exc:
        print(f"migrate: {exc}", file=sys.stderr)
        return 1
    counts = ", ".join(f"{count} {what}" for what, count in copied.items())
    print(f"Copied {data_dir} into {describe(url)}: {counts}.")
    print("Workspaces, the secret key and the logs stay in DATA_DIR (see docs/scale-out.md).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
