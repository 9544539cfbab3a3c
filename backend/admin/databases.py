"""The database copied while the server serves, and put back into an empty one.

SQLite: its online backup API, which copies a consistent state while the server
keeps writing (WAL readers never block writers). PostgreSQL: `pg_dump
--format=custom`, one consistent snapshot, restored by `pg_restore` in a single
transaction. The password travels in PGPASSWORD, never on a command line.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from backend.admin.errors import AdminError
from backend.storage import Store, is_postgres
from backend.storage.sql_store import SQLStore

BUSY_TIMEOUT_SECONDS = 30.0
CLIENT_HINT = "install PostgreSQL's client programs (Debian: apt-get install postgresql-client)"


def sqlite_file(database_url: str, data_dir: Path) -> Path | None:
    """The SQLite store's file, as `open_store` finds it; None for PostgreSQL."""
    if is_postgres(database_url):
        return None
    if database_url.startswith("sqlite:///"):
        return Path(database_url.removeprefix("sqlite:///"))
    if database_url:
        raise AdminError("DATABASE_URL: expected postgresql://... or sqlite:///PATH (or unset)")
    return data_dir / "app.db"


def copy_sqlite(source: Path, target: Path) -> None:
    """A consistent copy of the live SQLite database `source` (never created if missing)."""
    try:
        reader = sqlite3.connect(
            f"{source.resolve().as_uri()}?mode=rw", uri=True, timeout=BUSY_TIMEOUT_SECONDS
        )
    except sqlite3.Error as exc:
        raise AdminError(f"{source}: cannot open the database: {exc}") from None
    try:
        writer = sqlite3.connect(target)
        try:
            reader.backup(writer)  # all pages in one step: one consistent state
        finally:
            writer.close()
    except sqlite3.Error as exc:
        raise AdminError(f"{source}: the copy failed: {exc}") from None
    finally:
        reader.close()


def sqlite_is_empty(path: Path) -> bool:
    if not path.exists():
        return True
    reader = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        return bool(reader.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0)
    except sqlite3.DatabaseError:
        return False  # something, if not a database
    finally:
        reader.close()


def dump_postgres(url: str, target: Path) -> None:
    """`pg_dump`'s custom-format archive of the whole database (store and checkpoints)."""
    _run("pg_dump", ["--format=custom", "--no-owner", f"--file={target}"], url)


def restore_postgres(url: str, archive: Path, *, replace: bool) -> None:
    """Load `archive` in one transaction; `replace` drops what the archive recreates."""
    options = ["--no-owner", "--no-privileges", "--single-transaction", "--exit-on-error"]
    if replace:
        options += ["--clean", "--if-exists"]
    _run("pg_restore", [*options, str(archive)], url)


def postgres_tables(url: str) -> int:
    """How many tables the database has outside PostgreSQL's own schemas."""
    try:
        with psycopg.connect(url, connect_timeout=10) as db:
            row = db.execute(
                "SELECT count(*) FROM pg_tables"
                " WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
            ).fetchone()
    except psycopg.Error as exc:
        raise AdminError(f"the database cannot be reached: {_first_line(str(exc))}") from None
    return int(row[0]) if row else 0


def _run(program: str, arguments: list[str], url: str) -> None:
    if shutil.which(program) is None:
        raise AdminError(f"{program} was not found: {CLIENT_HINT}")
    params = conninfo_to_dict(url)
    env = dict(os.environ)
    password = params.pop("password", None)
    if password:
        env["PGPASSWORD"] = str(password)
    dsn = make_conninfo("", **params)
    command = [program, f"--dbname={dsn}", *arguments]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise AdminError(f"{program} failed: {done.stderr.strip() or done.returncode}")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def interrupt_running_turns(store: Store) -> int:
    """Mark every turn the copy holds as `running` interrupted: no server runs them here.

    A restored server has a new server id, so its start-up would not mark the turns
    that the original server held; every server named is done here instead.
    """
    if not isinstance(store, SQLStore):
        return 0
    field = store.database.dialect.json_text
    finish_reason = field.format(column="metadata", key="finish_reason")
    with store.database.reading() as db:
        rows = db.execute(
            "SELECT metadata FROM messages"
            f" WHERE role = 'assistant' AND {finish_reason} = 'running'"
        ).fetchall()
    servers = {json.loads(row["metadata"]).get("server") or "" for row in rows}
    return sum(store.interrupt_unfinished(server) for server in sorted(servers))
