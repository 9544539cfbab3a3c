"""The rows of OpenAI's Files and Containers APIs (`openai_files`, `containers` tables).

A file is the user's (its bytes: `backend/storage/file_blobs.py`). A container is one of
the user's sessions, named by `session_key`; it expires `expires_minutes` after its last
activity (`expired_at` is set once its sandbox is ended). Every read takes the user's
id, so another user's id finds nothing.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from typing import Any

from backend.storage.database import Database
from backend.storage.sessions import SessionKey

FILE_ID = re.compile(r"^file-[0-9a-f]{32}$")
CONTAINER_ID = re.compile(r"^cntr_[0-9a-f]{32}$")


def new_file_id() -> str:
    return f"file-{uuid.uuid4().hex}"


def new_container_id() -> str:
    """Also a valid session id: a container made for itself is the session of that name."""
    return f"cntr_{uuid.uuid4().hex}"


def valid_file_id(file_id: object) -> bool:
    return isinstance(file_id, str) and FILE_ID.fullmatch(file_id) is not None


def valid_container_id(container_id: object) -> bool:
    return isinstance(container_id, str) and CONTAINER_ID.fullmatch(container_id) is not None


@dataclass(frozen=True)
class StoredFile:
    id: str
    user_id: int
    filename: str
    purpose: str
    bytes: int
    created_at: float


@dataclass(frozen=True)
class Container:
    id: str
    user_id: int
    session_key: SessionKey
    name: str
    expires_minutes: int
    created_at: float
    last_active_at: float
    expired_at: float | None

    def expires_at(self) -> float:
        return self.last_active_at + self.expires_minutes * 60

    def expired(self, now: float) -> bool:
        return self.expired_at is not None or now >= self.expires_at()


def _file(row: Any) -> StoredFile:
    return StoredFile(
        id=row["id"],
        user_id=int(row["user_id"]),
        filename=row["filename"],
        purpose=row["purpose"],
        bytes=int(row["bytes"]),
        created_at=float(row["created_at"]),
    )


def _container(row: Any) -> Container:
    expired = row["expired_at"]
    return Container(
        id=row["id"],
        user_id=int(row["user_id"]),
        session_key=row["session_key"],
        name=row["name"],
        expires_minutes=int(row["expires_minutes"]),
        created_at=float(row["created_at"]),
        last_active_at=float(row["last_active_at"]),
        expired_at=None if expired is None else float(expired),
    )


class OpenAIObjectRows:
    """The `Store`'s file and container methods, over the SQL store's `database`."""

    database: Database

    # Files

    def add_file(
        self, user_id: int, file_id: str, filename: str, purpose: str, size: int
    ) -> StoredFile:
        with self.database.transaction() as db:
            row = db.execute(
                "INSERT INTO openai_files (id, user_id, filename, purpose, bytes, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?) RETURNING *",
                (file_id, user_id, filename, purpose, size, time.time()),
            ).fetchone()
        return _file(row)

    def get_file(self, user_id: int, file_id: str) -> StoredFile | None:
        with self.database.reading() as db:
            row = db.execute(
                "SELECT * FROM openai_files WHERE id = ? AND user_id = ?", (file_id, user_id)
            ).fetchone()
        return _file(row) if row else None

    def list_files(self, user_id: int) -> list[StoredFile]:
        """Oldest first."""
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT * FROM openai_files WHERE user_id = ? ORDER BY created_at, id", (user_id,)
            ).fetchall()
        return [_file(row) for row in rows]

    def delete_file(self, user_id: int, file_id: str) -> bool:
        with self.database.transaction() as db:
            return (
                db.execute(
                    "DELETE FROM openai_files WHERE id = ? AND user_id = ?", (file_id, user_id)
                ).rowcount
                > 0
            )

    # Containers

    def add_container(
        self,
        user_id: int,
        container_id: str,
        session_key: SessionKey,
        name: str,
        expires_minutes: int,
    ) -> Container:
        now = time.time()
        with self.database.transaction() as db:
            row = db.execute(
                "INSERT INTO containers (id, user_id, session_key, name, expires_minutes,"
                " created_at, last_active_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING *",
                (container_id, user_id, session_key, name, expires_minutes, now, now),
            ).fetchone()
        return _container(row)

    def get_container(self, user_id: int, container_id: str) -> Container | None:
        with self.database.reading() as db:
            row = db.execute(
                "SELECT * FROM containers WHERE id = ? AND user_id = ?", (container_id, user_id)
            ).fetchone()
        return _container(row) if row else None

    def container_of_session(self, session_key: SessionKey) -> Container | None:
        """The newest container of the session, if it has one."""
        with self.database.reading() as db:
            row = db.execute(
                "SELECT * FROM containers WHERE session_key = ?"
                " ORDER BY created_at DESC, id LIMIT 1",
                (session_key,),
            ).fetchone()
        return _container(row) if row else None

    def list_containers(self, user_id: int) -> list[Container]:
        """Oldest first."""
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT * FROM containers WHERE user_id = ? ORDER BY created_at, id", (user_id,)
            ).fetchall()
        return [_container(row) for row in rows]

    def live_containers(self) -> list[Container]:
        """Every container not yet marked expired (the expiry sweep's)."""
        with self.database.reading() as db:
            rows = db.execute("SELECT * FROM containers WHERE expired_at IS NULL").fetchall()
        return [_container(row) for row in rows]

    def touch_container(self, container_id: str, when: float) -> None:
        """It was used at `when` (unless already expired)."""
        with self.database.transaction() as db:
            db.execute(
                "UPDATE containers SET last_active_at = ? WHERE id = ? AND expired_at IS NULL",
                (when, container_id),
            )

    def expire_container(self, container_id: str, when: float) -> bool:
        """Mark it expired; False if it already was (so only one caller ends its sandbox)."""
        with self.database.transaction() as db:
            return (
                db.execute(
                    "UPDATE containers SET expired_at = ? WHERE id = ? AND expired_at IS NULL",
                    (when, container_id),
                ).rowcount
                > 0
            )

    def delete_container(self, user_id: int, container_id: str) -> bool:
        with self.database.transaction() as db:
            return (
                db.execute(
                    "DELETE FROM containers WHERE id = ? AND user_id = ?", (container_id, user_id)
                ).rowcount
                > 0
            )

    def forget_session_containers(self, session_key: SessionKey) -> None:
        """The session is deleted: so are its containers."""
        with self.database.transaction() as db:
            db.execute("DELETE FROM containers WHERE session_key = ?", (session_key,))
