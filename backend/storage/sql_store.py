"""`Store` written once in SQL, over a `Database` (SQLite or PostgreSQL).

The queries use `?` placeholders and the SQL that both databases speak (`ON CONFLICT
DO NOTHING`, `RETURNING`); what differs lives in the adapter: connections,
transactions, and which driver errors mean busy, full or a broken constraint.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from backend.storage.base import (
    ROOT,
    ApiKey,
    Conversation,
    ConversationNotFound,
    Message,
    SessionOwnedByAnotherUser,
    User,
    UsernameTaken,
)
from backend.storage.data_sources import DataSourceRows
from backend.storage.database import Connection, Database
from backend.storage.evals import EvalRows
from backend.storage.feedback import FeedbackRows
from backend.storage.groups import GroupRows
from backend.storage.identities import IdentityRows
from backend.storage.limit_values import UserLimits, limits_from_row
from backend.storage.mcp_servers import McpServerRows
from backend.storage.migrations import MIGRATIONS, SCHEMA_TABLE, statements
from backend.storage.openai_objects import OpenAIObjectRows
from backend.storage.sessions import SessionKey
from backend.storage.usage import UsageRows
from backend.storage.work_places import WorkPlaceRows

INTERRUPTED = "The server stopped while this turn was running."
KEY_USE_RESOLUTION = 60.0  # seconds: an API key's last_used_at is kept to about this


class SQLStore(
    DataSourceRows,
    EvalRows,
    FeedbackRows,
    GroupRows,
    IdentityRows,
    McpServerRows,
    OpenAIObjectRows,
    UsageRows,
    WorkPlaceRows,
):
    def __init__(self, database: Database) -> None:
        self.database = database
        self._migrate()

    def _migrate(self) -> None:
        with self.database.transaction() as db:
            self.database.schema_lock(db)
            db.execute(SCHEMA_TABLE)
            row = db.execute("SELECT version FROM schema_version").fetchone()
            if row is None:
                version = self.database.legacy_version(db)
                db.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))
            else:
                version = int(row["version"])
            for number in range(version + 1, len(MIGRATIONS) + 1):
                for statement in statements(number, self.database.dialect):
                    db.execute(statement)
                db.execute("UPDATE schema_version SET version = ?", (number,))

    def schema_version(self) -> int:
        with self.database.reading() as db:
            return int(db.execute("SELECT version FROM schema_version").fetchone()["version"])

    # Users

    def get_user(self, username: str) -> User | None:
        with self.database.reading() as db:
            row = db.execute("SELECT * FROM users WHERE username = ?", (username,)).fetchone()
        return _user(row) if row else None

    def get_user_by_id(self, user_id: int) -> User | None:
        with self.database.reading() as db:
            row = db.execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()
        return _user(row) if row else None

    def create_user(self, username: str, password_hash: str, *, is_admin: bool = False) -> User:
        try:
            with self.database.transaction() as db:
                row = db.execute(
                    "INSERT INTO users (username, password_hash, is_admin, created_at)"
                    " VALUES (?, ?, ?, ?) RETURNING *",
                    (username, password_hash, int(is_admin), time.time()),
                ).fetchone()
        except self.database.integrity_errors:
            raise UsernameTaken(username) from None
        return _user(row)

    def set_password_hash(
        self, user_id: int, password_hash: str, *, end_credentials: bool = False
    ) -> User | None:
        with self.database.transaction() as db:
            db.execute("UPDATE users SET password_hash = ? WHERE id = ?", (password_hash, user_id))
            if end_credentials:
                return _end_credentials(db, user_id)
            row = db.execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()
        return _user(row) if row else None

    def end_credentials(self, user_id: int) -> User | None:
        with self.database.transaction() as db:
            return _end_credentials(db, user_id)

    def list_users(self) -> list[User]:
        with self.database.reading() as db:
            rows = db.execute("SELECT * FROM users ORDER BY id").fetchall()
        return [_user(row) for row in rows]

    def update_user(
        self,
        user_id: int,
        *,
        disabled: bool | None = None,
        limits: UserLimits | None = None,
        email: str | None = None,
        display_name: str | None = None,
    ) -> User | None:
        changes: dict[str, Any] = {}
        if disabled is not None:
            changes["disabled"] = int(disabled)
        if email is not None:
            changes["email"] = email
        if display_name is not None:
            changes["display_name"] = display_name
        if limits is not None:
            changes.update(
                max_sandboxes=limits.max_sandboxes,
                max_runs=limits.max_runs,
                max_disk_mb=limits.max_disk_mb,
                max_tokens_per_day=limits.max_tokens_per_day,
                max_sandbox_seconds_per_day=limits.max_sandbox_seconds_per_day,
            )
        with self.database.transaction() as db:
            if changes:
                assignments = ", ".join(f"{column} = ?" for column in changes)
                db.execute(
                    f"UPDATE users SET {assignments} WHERE id = ?", (*changes.values(), user_id)
                )
            row = db.execute("SELECT * FROM users WHERE id = ?", (user_id,)).fetchone()
        return _user(row) if row else None

    def delete_user(self, user_id: int) -> bool:
        with self.database.transaction() as db:
            return db.execute("DELETE FROM users WHERE id = ?", (user_id,)).rowcount > 0

    # Signed-out tokens and API keys

    def user_for_token(self, user_id: int, token_id: str) -> User | None:
        # One query on every request: the user and whether the token was signed out.
        with self.database.reading() as db:
            row = db.execute(
                "SELECT * FROM users WHERE id = ? AND NOT EXISTS"
                " (SELECT 1 FROM revoked_tokens WHERE token_id = ?)",
                (user_id, token_id),
            ).fetchone()
        return _user(row) if row else None

    def revoke_token(self, token_id: str, expires_at: float) -> None:
        with self.database.transaction() as db:
            db.execute("DELETE FROM revoked_tokens WHERE expires_at < ?", (time.time(),))
            db.execute(
                "INSERT INTO revoked_tokens (token_id, expires_at) VALUES (?, ?)"
                " ON CONFLICT DO NOTHING",
                (token_id, expires_at),
            )

    def create_api_key(self, user_id: int, name: str, key_hash: str) -> ApiKey:
        with self.database.transaction() as db:
            row = db.execute(
                "INSERT INTO api_keys (user_id, name, key_hash, created_at)"
                " VALUES (?, ?, ?, ?) RETURNING *",
                (user_id, name, key_hash, time.time()),
            ).fetchone()
        return _api_key(row)

    def list_api_keys(self, user_id: int) -> list[ApiKey]:
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT * FROM api_keys WHERE user_id = ? ORDER BY id", (user_id,)
            ).fetchall()
        return [_api_key(row) for row in rows]

    def delete_api_key(self, user_id: int, key_id: int) -> bool:
        with self.database.transaction() as db:
            cursor = db.execute(
                "DELETE FROM api_keys WHERE id = ? AND user_id = ?", (key_id, user_id)
            )
            return cursor.rowcount > 0

    def user_for_api_key(self, key_hash: str, now: float) -> User | None:
        # Found by its hash through the unique index: the hash of a random key reveals
        # nothing of the key, so how long the lookup takes gives nothing away either.
        with self.database.reading() as db:
            row = db.execute(
                "SELECT users.*, api_keys.id AS key_id, api_keys.last_used_at AS key_used"
                " FROM api_keys JOIN users ON users.id = api_keys.user_id"
                " WHERE api_keys.key_hash = ?",
                (key_hash,),
            ).fetchone()
        if row is None:
            return None
        # A write on every request would serialise a script's calls; once a minute is enough.
        if row["key_used"] is None or now - row["key_used"] >= KEY_USE_RESOLUTION:
            with self.database.transaction() as db:
                db.execute(
                    "UPDATE api_keys SET last_used_at = ? WHERE id = ?", (now, row["key_id"])
                )
        return _user(row)

    # Conversations

    def conversation_for_session(
        self, user_id: int, session_id: SessionKey, title: str
    ) -> Conversation:
        with self.database.transaction() as db:
            return _conversation_for_session(db, user_id, session_id, title)

    def begin_turn(
        self,
        user_id: int,
        session_id: SessionKey,
        title: str,
        text: str,
        *,
        history: bool,
        parent_id: int | None = None,
    ) -> tuple[Conversation, list[Message], Message | None]:
        with self.database.transaction() as db:
            conversation = _conversation_for_session(db, user_id, session_id, title)
            earlier = _messages(db, conversation.id) if history else []
            stored = None
            if text:
                stored = _insert_message(db, conversation.id, "user", text, {}, parent_id)
        return conversation, earlier, stored

    def start_conversation(self, conversation: Conversation, text: str) -> Message | None:
        c = conversation
        with self.database.transaction() as db:
            db.execute(
                "INSERT INTO conversations"
                " (id, user_id, session_id, title, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (c.id, c.user_id, c.session_key, c.title[:80], c.created_at, c.updated_at),
            )
            return _insert_message(db, c.id, "user", text, {}, ROOT) if text else None

    def session_owner(self, session_id: SessionKey) -> int | None:
        with self.database.reading() as db:
            row = db.execute(
                "SELECT user_id FROM conversations WHERE session_id = ?", (session_id,)
            ).fetchone()
        return int(row["user_id"]) if row else None

    def legacy_sessions(self) -> list[tuple[str, str]]:
        with self.database.reading() as db:
            rows = db.execute("SELECT old_id, session_key FROM legacy_sessions").fetchall()
        return [(str(row["old_id"]), str(row["session_key"])) for row in rows]

    def forget_legacy_session(self, old_id: str) -> None:
        with self.database.transaction() as db:
            db.execute("DELETE FROM legacy_sessions WHERE old_id = ?", (old_id,))

    def list_conversations(self, user_id: int) -> list[Conversation]:
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT * FROM conversations WHERE user_id = ? ORDER BY updated_at DESC",
                (user_id,),
            ).fetchall()
        return [_conversation(row) for row in rows]

    def get_conversation(self, user_id: int, conversation_id: str) -> Conversation | None:
        with self.database.reading() as db:
            row = db.execute(
                "SELECT * FROM conversations WHERE id = ? AND user_id = ?",
                (conversation_id, user_id),
            ).fetchone()
        return _conversation(row) if row else None

    def delete_conversation(self, user_id: int, conversation_id: str) -> bool:
        with self.database.transaction() as db:
            cursor = db.execute(
                "DELETE FROM conversations WHERE id = ? AND user_id = ?",
                (conversation_id, user_id),
            )
            return cursor.rowcount > 0

    # Messages

    def add_message(
        self,
        conversation_id: str,
        role: str,
        content: str,
        metadata: dict[str, Any] | None = None,
        parent_id: int | None = None,
    ) -> Message:
        try:
            with self.database.transaction() as db:
                return _insert_message(
                    db, conversation_id, role, content, metadata or {}, parent_id
                )
        except self.database.integrity_errors:
            raise ConversationNotFound(conversation_id) from None

    def update_message(self, message_id: int, content: str, metadata: dict[str, Any]) -> None:
        with self.database.transaction() as db:
            db.execute(
                "UPDATE messages SET content = ?, metadata = ? WHERE id = ?",
                (content, json.dumps(metadata), message_id),
            )

    def response_message(self, conversation_id: str, response_id: str) -> int | None:
        field = self.database.dialect.json_text.format(column="metadata", key="response_id")
        with self.database.reading() as db:
            row = db.execute(
                "SELECT id FROM messages WHERE conversation_id = ? AND role = 'assistant'"
                f" AND {field} = ? ORDER BY id LIMIT 1",
                (conversation_id, response_id),
            ).fetchone()
        return int(row["id"]) if row is not None else None

    def interrupt_unfinished(self, server: str) -> int:
        field = self.database.dialect.json_text
        finish_reason = field.format(column="metadata", key="finish_reason")
        runner = field.format(column="metadata", key="server")
        with self.database.transaction() as db:
            rows = db.execute(
                "SELECT id, metadata FROM messages WHERE role = 'assistant'"
                f" AND {finish_reason} = 'running' AND ({runner} = ? OR {runner} IS NULL)",
                (server,),
            ).fetchall()
            for row in rows:
                metadata = json.loads(row["metadata"])
                metadata.pop("server", None)
                metadata.update(finish_reason="interrupted", error=INTERRUPTED)
                db.execute(
                    "UPDATE messages SET metadata = ? WHERE id = ?",
                    (json.dumps(metadata), row["id"]),
                )
        return len(rows)

    def list_messages(self, conversation_id: str) -> list[Message]:
        with self.database.reading() as db:
            return _messages(db, conversation_id)

    # A session's steps

    def add_session_step(self, session_id: SessionKey, step: dict[str, Any]) -> None:
        try:
            with self.database.transaction() as db:
                db.execute(
                    "INSERT INTO session_steps (session_id, step, created_at) VALUES (?, ?, ?)",
                    (session_id, json.dumps(step), time.time()),
                )
        except self.database.integrity_errors:
            raise ConversationNotFound(session_id) from None

    def list_session_steps(self, session_id: SessionKey) -> list[dict[str, Any]]:
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT step FROM session_steps WHERE session_id = ? ORDER BY id", (session_id,)
            ).fetchall()
        return [json.loads(row["step"]) for row in rows]

    # Failed logins

    def locked_until(self, keys: Sequence[str]) -> float:
        marks = ", ".join("?" * len(keys))
        with self.database.reading() as db:
            row = db.execute(
                f"SELECT max(locked_until) AS until FROM login_failures WHERE key IN ({marks})",
                tuple(keys),
            ).fetchone()
        return float(row["until"] or 0) if row else 0.0

    def count_login_failure(self, key: str, now: float, forget_before: float) -> int:
        with self.database.transaction() as db:
            db.execute("DELETE FROM login_failures WHERE updated_at < ?", (forget_before,))
            row = db.execute(
                "INSERT INTO login_failures (key, count, locked_until, updated_at)"
                " VALUES (?, 1, 0, ?) ON CONFLICT (key) DO UPDATE"
                " SET count = login_failures.count + 1, updated_at = excluded.updated_at"
                " RETURNING count",
                (key, now),
            ).fetchone()
        return int(row["count"])

    def lock_login(self, key: str, until: float) -> None:
        greatest = self.database.dialect.greatest
        with self.database.transaction() as db:
            db.execute(
                f"UPDATE login_failures SET locked_until = {greatest}(locked_until, ?)"
                " WHERE key = ?",
                (until, key),
            )

    def clear_login_failures(self, keys: Sequence[str]) -> None:
        marks = ", ".join("?" * len(keys))
        with self.database.transaction() as db:
            db.execute(f"DELETE FROM login_failures WHERE key IN ({marks})", tuple(keys))

    def close(self) -> None:
        self.database.close()


def _conversation_for_session(
    db: Connection, user_id: int, session_id: SessionKey, title: str
) -> Conversation:
    now = time.time()
    db.execute(
        "INSERT INTO conversations (id, user_id, session_id, title, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
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
    db: Connection,
    conversation_id: str,
    role: str,
    content: str,
    meta: dict[str, Any],
    parent_id: int | None,
) -> Message:
    """`parent_id`: `ROOT` for a first message, None for after the latest one."""
    now = time.time()
    if parent_id is None:
        latest = db.execute(
            "SELECT MAX(id) AS id FROM messages WHERE conversation_id = ?", (conversation_id,)
        ).fetchone()
        parent_id = latest["id"] if latest is not None else None
    parent = None if parent_id in (None, ROOT) else int(parent_id)
    row = db.execute(
        "INSERT INTO messages (conversation_id, role, content, metadata, created_at, parent_id)"
        " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
        (conversation_id, role, content, json.dumps(meta), now, parent),
    ).fetchone()
    db.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id))
    return Message(int(row["id"]), conversation_id, role, content, now, meta, parent)


def _messages(db: Connection, conversation_id: str) -> list[Message]:
    rows = db.execute(
        "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)
    ).fetchall()
    return [
        Message(
            int(row["id"]),
            row["conversation_id"],
            row["role"],
            row["content"],
            row["created_at"],
            json.loads(row["metadata"]),
            None if row["parent_id"] is None else int(row["parent_id"]),
        )
        for row in rows
    ]


def _end_credentials(db: Connection, user_id: int) -> User | None:
    # One transaction: no key outlives the epoch that ends its owner's tokens.
    db.execute("DELETE FROM api_keys WHERE user_id = ?", (user_id,))
    row = db.execute(
        "UPDATE users SET credentials_epoch = credentials_epoch + 1 WHERE id = ? RETURNING *",
        (user_id,),
    ).fetchone()
    return _user(row) if row else None


def _user(row: Any) -> User:
    return User(
        int(row["id"]),
        row["username"],
        row["password_hash"],
        bool(row["is_admin"]),
        row["created_at"],
        disabled=bool(row["disabled"]),
        limits=limits_from_row(row),
        credentials_epoch=int(_column(row, "credentials_epoch") or 0),
        email=_column(row, "email") or "",
        display_name=_column(row, "display_name") or "",
    )


def _column(row: Any, name: str) -> Any:
    """A column that a store opened on an older schema (before migration 9, 10 or 14)
    lacks: None."""
    try:
        return row[name]
    except (IndexError, KeyError):
        return None


def _api_key(row: Any) -> ApiKey:
    return ApiKey(
        int(row["id"]),
        int(row["user_id"]),
        row["name"],
        row["created_at"],
        row["last_used_at"],
    )


def _conversation(row: Any) -> Conversation:
    return Conversation(
        row["id"],
        int(row["user_id"]),
        row["session_id"],
        row["title"],
        row["created_at"],
        row["updated_at"],
    )
