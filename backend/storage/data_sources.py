"""A user's data sources (`data_sources`), whom they are shared with, the sessions that
attach them, and the notes on their tables and columns.

A source is a read-only database connection (PostgreSQL, MySQL/MariaDB) or a database
file kept by the server (SQLite, DuckDB). Its password is stored sealed: `sealed_secrets`
is ciphertext the core layer made with the server's key (`backend/core/secret_box.py`).
The catalog (tables, columns, keys, samples) is kept as JSON text, as the last refresh
found it. A source is its owner's; `data_source_shares` names the users it is shared with
read-only, and `shared_with_all` (an admin's choice) shares it with everyone.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from backend.storage.database import Database
from backend.storage.sessions import SessionKey, check_key

# A database file's place: DATA_DIR/data-sources/u<owner id>-<source id>/database.
SOURCES_FOLDER = "data-sources"
# A dataset is a DuckDB file the server built from uploaded files.
SourceKind = Literal["postgresql", "mysql", "sqlite", "duckdb", "dataset"]
NoteStatus = Literal["accepted", "proposed"]
SOURCE_ID_PATTERN = r"^ds_[0-9a-f]{24}$"
_SOURCE_ID = re.compile(SOURCE_ID_PATTERN)
# A source's name is how code in the sandbox names it: sql("sales", "SELECT ...").
SOURCE_NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"


def valid_source_id(source_id: object) -> bool:
    return isinstance(source_id, str) and _SOURCE_ID.fullmatch(source_id) is not None


def new_source_id() -> str:
    return f"ds_{secrets.token_hex(12)}"


@dataclass(frozen=True)
class DataSource:
    id: str
    user_id: int  # the owner
    name: str
    kind: SourceKind
    description: str
    host: str  # a network source's host; "" for a file
    port: int
    database_name: str
    username: str
    sealed_secrets: str  # ciphertext of {"password": ...}; "" for none
    shared_with_all: bool
    shared_with: list[int]  # users it is shared with, read-only
    shared_groups: list[int]  # groups whose members it is shared with, read-only (an admin's)
    catalog: str  # JSON text (backend/tools/data_sources/catalog.py); "" until refreshed
    catalog_at: float | None
    created_at: float

    def visible_to(self, user_id: int, groups: Sequence[int] = ()) -> bool:
        """Whether `user_id`, a member of `groups`, may see it."""
        return (
            self.user_id == user_id
            or self.shared_with_all
            or user_id in self.shared_with
            or any(group in self.shared_groups for group in groups)
        )


@dataclass(frozen=True)
class DataNote:
    source_id: str
    target: str  # "" for the source, "table", or "table.column"
    status: NoteStatus
    note: str
    author_id: int
    updated_at: float


@dataclass(frozen=True)
class VerifiedAnswer:
    id: str
    source_id: str
    user_id: int  # who verified it
    question: str
    answer: str
    code: str
    queries: list[str]  # the SQL its code ran on the source
    created_at: float


class SourceNameTaken(Exception):
    """The owner has another source of this name."""


_FIELDS = (
    "name",
    "kind",
    "description",
    "host",
    "port",
    "database_name",
    "username",
    "sealed_secrets",
    "shared_with_all",
)


def _source(row: Any, shared_with: list[int], shared_groups: list[int]) -> DataSource:
    return DataSource(
        id=row["id"],
        user_id=int(row["user_id"]),
        name=row["name"],
        kind=row["kind"],
        description=row["description"],
        host=row["host"],
        port=int(row["port"]),
        database_name=row["database_name"],
        username=row["username"],
        sealed_secrets=row["sealed_secrets"],
        shared_with_all=bool(row["shared_with_all"]),
        shared_with=shared_with,
        shared_groups=shared_groups,
        catalog=row["catalog"],
        catalog_at=row["catalog_at"],
        created_at=row["created_at"],
    )


def _note(row: Any) -> DataNote:
    return DataNote(
        source_id=row["source_id"],
        target=row["target"],
        status=row["status"],
        note=row["note"],
        author_id=int(row["author_id"]),
        updated_at=row["updated_at"],
    )


class DataSourceRows:
    """The `Store`'s data source methods, over the SQL store's `database`."""

    database: Database

    def _shares(self, db: Any, table: str, column: str, ids: Sequence[str]) -> dict[str, list[int]]:
        shares: dict[str, list[int]] = {source_id: [] for source_id in ids}
        if ids:
            marks = ", ".join("?" for _ in ids)
            rows = db.execute(
                f"SELECT source_id, {column} AS shared FROM {table}"
                f" WHERE source_id IN ({marks}) ORDER BY {column}",
                tuple(ids),
            ).fetchall()
            for row in rows:
                shares[row["source_id"]].append(int(row["shared"]))
        return shares

    def _sources(self, db: Any, rows: Sequence[Any]) -> list[DataSource]:
        ids = [row["id"] for row in rows]
        users = self._shares(db, "data_source_shares", "user_id", ids)
        groups = self._shares(db, "data_source_groups", "group_id", ids)
        return [_source(row, users[row["id"]], groups[row["id"]]) for row in rows]

    def visible_sources(self, user_id: int) -> list[DataSource]:
        """The sources `user_id` owns or may read, oldest first."""
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT * FROM data_sources WHERE user_id = ? OR shared_with_all = 1 OR id IN"
                " (SELECT source_id FROM data_source_shares WHERE user_id = ?) OR id IN"
                " (SELECT g.source_id FROM data_source_groups g JOIN user_group_members m"
                " ON m.group_id = g.group_id WHERE m.user_id = ?)"
                " ORDER BY created_at, id",
                (user_id, user_id, user_id),
            ).fetchall()
            return self._sources(db, rows)

    def get_source(self, source_id: str) -> DataSource | None:
        if not valid_source_id(source_id):
            return None
        with self.database.reading() as db:
            row = db.execute("SELECT * FROM data_sources WHERE id = ?", (source_id,)).fetchone()
            return self._sources(db, [row])[0] if row else None

    def create_source(self, user_id: int, **fields: Any) -> DataSource:
        """`fields`: every one of `_FIELDS`."""
        source_id = new_source_id()
        values = tuple(int(fields[f]) if f == "shared_with_all" else fields[f] for f in _FIELDS)
        try:
            with self.database.transaction() as db:
                db.execute(
                    f"INSERT INTO data_sources (id, user_id, {', '.join(_FIELDS)}, created_at)"
                    f" VALUES (?, ?, {', '.join('?' for _ in _FIELDS)}, ?)",
                    (source_id, user_id, *values, time.time()),
                )
        except self.database.integrity_errors:
            raise SourceNameTaken(fields["name"]) from None
        source = self.get_source(source_id)
        assert source is not None
        return source

    def update_source(self, source_id: str, **fields: Any) -> DataSource | None:
        """Set the given `_FIELDS`; None when there is no such source."""
        changed = [f for f in _FIELDS if f in fields]
        values = [int(fields[f]) if f == "shared_with_all" else fields[f] for f in changed]
        try:
            with self.database.transaction() as db:
                if changed:
                    db.execute(
                        f"UPDATE data_sources SET {', '.join(f'{f} = ?' for f in changed)}"
                        " WHERE id = ?",
                        (*values, source_id),
                    )
        except self.database.integrity_errors:
            raise SourceNameTaken(fields.get("name", "")) from None
        return self.get_source(source_id)

    def set_source_catalog(self, source_id: str, catalog: str) -> None:
        with self.database.transaction() as db:
            db.execute(
                "UPDATE data_sources SET catalog = ?, catalog_at = ? WHERE id = ?",
                (catalog, time.time(), source_id),
            )

    def set_source_shares(self, source_id: str, user_ids: Sequence[int]) -> None:
        """Share the source with exactly `user_ids` (existing users only)."""
        self._share(source_id, "data_source_shares", "user_id", "users", user_ids)

    def set_source_groups(self, source_id: str, group_ids: Sequence[int]) -> None:
        """Share the source with exactly the members of `group_ids` (existing groups only)."""
        self._share(source_id, "data_source_groups", "group_id", "user_groups", group_ids)

    def _share(
        self, source_id: str, table: str, column: str, known: str, ids: Sequence[int]
    ) -> None:
        with self.database.transaction() as db:
            db.execute(f"DELETE FROM {table} WHERE source_id = ?", (source_id,))
            for shared in sorted(set(ids)):
                db.execute(
                    f"INSERT INTO {table} (source_id, {column}) SELECT ?, id FROM {known}"
                    " WHERE id = ?",
                    (source_id, shared),
                )

    def delete_source(self, source_id: str) -> bool:
        """Gone from every session that attached it, with its notes and verified answers."""
        with self.database.transaction() as db:
            return db.execute("DELETE FROM data_sources WHERE id = ?", (source_id,)).rowcount > 0

    # Sessions -----------------------------------------------------------------------

    def attach_sources(self, key: SessionKey, source_ids: Sequence[str]) -> None:
        """The session `key` attaches exactly `source_ids` (checked by the caller)."""
        check_key(key)
        with self.database.transaction() as db:
            db.execute("DELETE FROM session_sources WHERE session_key = ?", (key,))
            for source_id in sorted(set(source_ids)):
                db.execute(
                    "INSERT INTO session_sources (session_key, source_id) VALUES (?, ?)",
                    (key, source_id),
                )

    def attached_sources(self, key: SessionKey) -> list[DataSource]:
        """The sources the session attached that still exist, by name."""
        check_key(key)
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT d.* FROM data_sources d JOIN session_sources s ON s.source_id = d.id"
                " WHERE s.session_key = ? ORDER BY d.name, d.id",
                (key,),
            ).fetchall()
            return self._sources(db, rows)

    def forget_session_sources(self, key: SessionKey) -> None:
        """A deleted session attaches nothing."""
        with self.database.transaction() as db:
            db.execute("DELETE FROM session_sources WHERE session_key = ?", (check_key(key),))

    # Notes --------------------------------------------------------------------------

    def source_notes(self, source_id: str) -> list[DataNote]:
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT * FROM data_notes WHERE source_id = ? ORDER BY target, status",
                (source_id,),
            ).fetchall()
        return [_note(row) for row in rows]

    def set_note(
        self, source_id: str, target: str, status: NoteStatus, note: str, author_id: int
    ) -> None:
        """Write (an empty `note`: remove) the note of `status` on `target`."""
        with self.database.transaction() as db:
            db.execute(
                "DELETE FROM data_notes WHERE source_id = ? AND target = ? AND status = ?",
                (source_id, target, status),
            )
            if note:
                db.execute(
                    "INSERT INTO data_notes (source_id, target, status, note, author_id,"
                    " updated_at) VALUES (?, ?, ?, ?, ?, ?)",
                    (source_id, target, status, note, author_id, time.time()),
                )

    # Verified answers ---------------------------------------------------------------

    def add_verified_answer(
        self,
        source_id: str,
        user_id: int,
        question: str,
        answer: str,
        code: str,
        queries: Sequence[str],
    ) -> VerifiedAnswer:
        found = VerifiedAnswer(
            id=f"va_{secrets.token_hex(12)}",
            source_id=source_id,
            user_id=user_id,
            question=question,
            answer=answer,
            code=code,
            queries=list(queries),
            created_at=time.time(),
        )
        with self.database.transaction() as db:
            db.execute(
                "INSERT INTO verified_answers (id, source_id, user_id, question, answer, code,"
                " queries, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    found.id,
                    source_id,
                    user_id,
                    question,
                    answer,
                    code,
                    json.dumps(found.queries),
                    found.created_at,
                ),
            )
        return found

    def verified_answers(self, source_ids: Sequence[str]) -> list[VerifiedAnswer]:
        """The answers verified on these sources, newest first."""
        if not source_ids:
            return []
        marks = ", ".join("?" for _ in source_ids)
        with self.database.reading() as db:
            rows = db.execute(
                f"SELECT * FROM verified_answers WHERE source_id IN ({marks})"
                " ORDER BY created_at DESC, id",
                tuple(source_ids),
            ).fetchall()
        return [
            VerifiedAnswer(
                id=row["id"],
                source_id=row["source_id"],
                user_id=int(row["user_id"]),
                question=row["question"],
                answer=row["answer"],
                code=row["code"],
                queries=[str(q) for q in json.loads(row["queries"])],
                created_at=row["created_at"],
            )
            for row in rows
        ]

    def delete_verified_answer(self, source_id: str, answer_id: str) -> bool:
        with self.database.transaction() as db:
            deleted = db.execute(
                "DELETE FROM verified_answers WHERE id = ? AND source_id = ?",
                (answer_id, source_id),
            )
            return deleted.rowcount > 0
