"""Persistence behind the `Store` interface; `open_store` picks the implementation."""

from __future__ import annotations

from pathlib import Path

from backend.config import ConfigError
from backend.storage.base import (
    Conversation,
    ConversationNotFound,
    Message,
    SessionOwnedByAnotherUser,
    Store,
    StoreBusy,
    StoreFull,
    User,
    UsernameTaken,
)
from backend.storage.sqlite import SQLiteStore

__all__ = [
    "Conversation",
    "ConversationNotFound",
    "Message",
    "SessionOwnedByAnotherUser",
    "Store",
    "StoreBusy",
    "StoreFull",
    "User",
    "UsernameTaken",
    "open_store",
]


def open_store(database_url: str, data_dir: Path) -> Store:
    """Open the database named by DATABASE_URL (empty: SQLite in DATA_DIR)."""
    if not database_url:
        return SQLiteStore(data_dir / "app.db")
    if database_url.startswith("sqlite:///"):
        return SQLiteStore(Path(database_url.removeprefix("sqlite:///")))
    if database_url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(
            "DATABASE_URL: PostgreSQL is not implemented yet; unset it to use SQLite in DATA_DIR"
        )
    raise ConfigError("DATABASE_URL: expected sqlite:///PATH (or unset for SQLite in DATA_DIR)")
