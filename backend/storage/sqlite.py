"""SQLite implementation of `Store`.

WAL mode with `synchronous=NORMAL`: a committed transaction is in the WAL file
before `add_message` returns, so it survives a `kill -9` of the server (only an
OS crash or power cut can lose the last transactions). Calls are short and
serialised by a lock, so one connection serves the event loop and worker threads.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from backend.storage.base import (
    Conversation,
    ConversationNotFound,
    Message,
    SessionOwnedByAnotherUser,
    StoreBusy,
    StoreFull,
    User,
    UsernameTaken,
)

BUSY_TIMEOUT_MS = 15_000
_MIGRATIONS = [
    """
    CREATE TABLE users (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        username TEXT NOT NULL UNIQUE,
        password_hash TEXT NOT NULL,
        is_admin INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
    CREATE TABLE conversations (
        id TEXT PRIMARY KEY,
        user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
        session_id TEXT NOT NULL UNIQUE,
        title TEXT NOT NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX conversations_by_user ON conversations(user_id, updated_at);
    CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL
    );
    CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
    """,
]


class SQLiteStore:
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
        self._migrate()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
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

    def _migrate(self) -> None:
        version = self._query("PRAGMA user_version")[0][0]
        for number, script in enumerate(_MIGRATIONS[version:], start=version + 1):
            with self._transaction() as db:
                for statement in filter(str.strip, script.split(";")):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version={number}")

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        with self._lock, _busy():
            return self._db.execute(sql, params).fetchall()

    def _write(self, sql: str, params: tuple[Any, ...] = ()) -> sqlite3.Cursor:
        with self._lock, _busy():
            return self._db.execute(sql, params)

    # Users

    def get_user(self, username: str) -> User | None:
        rows = self._query("SELECT * FROM users WHERE username = ?", (username,))
        return _user(rows[0]) if rows else None

    def get_user_by_id(self, user_id: int) -> User | None:
        rows = self._query("SELECT * FROM users WHERE id = ?", (user_id,))
        return _user(rows[0]) if rows else None

    def create_user(self, username: str, password_hash: str, *, is_admin: bool = False) -> User:
        try:
            cursor = self._write(
                "INSERT INTO users (username, password_hash, is_admin, created_at)"
                " VALUES (?, ?, ?, ?)",
                (username, password_hash, int(is_admin), time.time()),
            )
        except sqlite3.IntegrityError:
            raise UsernameTaken(username) from None
        user = self.get_user_by_id(int(cursor.lastrowid or 0))
        assert user is not None
        return user

    def set_password_hash(self, user_id: int, password_hash: str) -> None:
        self._write("UPDATE users SET password_hash = ? WHERE id = ?", (password_hash, user_id))

    # Conversations

    def conversation_for_session(self, user_id: int, session_id: str, title: str) -> Conversation:
        with self._transaction() as db:
            return _conversation_for_session(db, user_id, session_id, title)

    def begin_turn(
        self, user_id: int, session_id: str, title: str, text: str, *, history: bool
    ) -> tuple[Conversation, list[Message]]:
        with self._transaction() as db:
            conversation = _conversation_for_session(db, user_id, session_id, title)
            earlier = _messages(db, conversation.id) if history else []
            if text:
                _insert_message(db, conversation.id, "user", text, {})
        return conversation, earlier

    def start_conversation(self, conversation: Conversation, text: str) -> None:
        c = conversation
        with self._transaction() as db:
            db.execute(
                "INSERT INTO conversations VALUES (?, ?, ?, ?, ?, ?)",
                (c.id, c.user_id, c.session_id, c.title[:80], c.created_at, c.updated_at),
            )
            if text:
                _insert_message(db, c.id, "user", text, {})

    def session_owner(self, session_id: str) -> int | None:
        rows = self._query("SELECT user_id FROM conversations WHERE session_id = ?", (session_id,))
        return int(rows[0][0]) if rows else None

    def list_conversations(self, user_id: int) -> list[Conversation]:
        rows = self._query(
            "SELECT * FROM conversations WHERE user_id = ? ORDER BY updated_at DESC", (user_id,)
        )
        return [_conversation(row) for row in rows]

    def get_conversation(self, user_id: int, conversation_id: str) -> Conversation | None:
        rows = self._query(
            "SELECT * FROM conversations WHERE id = ? AND user_id = ?", (conversation_id, user_id)
        )
        return _conversation(rows[0]) if rows else None

    def delete_conversation(self, user_id: int, conversation_id: str) -> bool:
        cursor = self._write(
            "DELETE FROM conversations WHERE id = ? AND user_id = ?", (conversation_id, user_id)
        )
        return cursor.rowcount > 0

    # Messages

    def add_message(
        self,
        conversation_id: str,
        role: str,
        content: str,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        try:
            with self._transaction() as db:
                return _insert_message(db, conversation_id, role, content, metadata or {})
        except sqlite3.IntegrityError:
            raise ConversationNotFound(conversation_id) from None

    def update_message(self, message_id: int, content: str, metadata: dict[str, Any]) -> None:
        self._write(
            "UPDATE messages SET content = ?, metadata = ? WHERE id = ?",
            (content, json.dumps(metadata), message_id),
        )

    def interrupt_unfinished(self) -> int:
        cursor = self._write(
            "UPDATE messages SET metadata = json_set(metadata, '$.finish_reason', 'interrupted',"
            " '$.error', 'The server stopped while this turn was running.')"
            " WHERE role = 'assistant' AND json_extract(metadata, '$.finish_reason') = 'running'"
        )
        return cursor.rowcount

    def list_messages(self, conversation_id: str) -> list[Message]:
        with self._lock, _busy():
            return _messages(self._db, conversation_id)

    def close(self) -> None:
        with self._lock:
            self._db.close()


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


def _conversation_for_session(
    db: sqlite3.Connection, user_id: int, session_id: str, title: str
) -> Conversation:
    now = time.time()
    db.execute(
        "INSERT OR IGNORE INTO conversations VALUES (?, ?, ?, ?, ?, ?)",
        (uuid.uuid4().hex, user_id, session_id, title[:80], now, now),
    )
    # A conversation opened untitled (by an upload) takes its first message's title.
    db.execute(
        "UPDATE conversations SET title = ? WHERE session_id = ? AND user_id = ? AND title = ''",
        (title[:80], session_id, user_id),
    )
    row = db.execute("SELECT * FROM conversations WHERE session_id = ?", (session_id,)).fetchone()
    if row["user_id"] != user_id:
        raise SessionOwnedByAnotherUser(session_id)
    return _conversation(row)


def _insert_message(
    db: sqlite3.Connection, conversation_id: str, role: str, content: str, meta: dict[str, Any]
) -> Message:
    now = time.time()
    cursor = db.execute(
        "INSERT INTO messages (conversation_id, role, content, metadata, created_at)"
        " VALUES (?, ?, ?, ?, ?)",
        (conversation_id, role, content, json.dumps(meta), now),
    )
    db.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id))
    return Message(int(cursor.lastrowid or 0), conversation_id, role, content, now, meta)


def _messages(db: sqlite3.Connection, conversation_id: str) -> list[Message]:
    rows = db.execute(
        "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
    ).fetchall()
    return [
        Message(
            row["id"],
            row["conversation_id"],
            row["role"],
            row["content"],
            row["created_at"],
            json.loads(row["metadata"]),
        )
        for row in rows
    ]


def _user(row: sqlite3.Row) -> User:
    return User(
        row["id"], row["username"], row["password_hash"], bool(row["is_admin"]), row["created_at"]
    )


def _conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(
        row["id"],
        row["user_id"],
        row["session_id"],
        row["title"],
        row["created_at"],
        row["updated_at"],
    )
