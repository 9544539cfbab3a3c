"""Persistence behind the `Store` interface; `open_store` picks the implementation."""

from __future__ import annotations

from pathlib import Path

from backend.config import ConfigError
from backend.storage.base import (
    ROOT,
    ApiKey,
    Conversation,
    ConversationNotFound,
    Message,
    SessionOwnedByAnotherUser,
    Store,
    StoreBusy,
    StoreFull,
    StoreUnavailable,
    User,
    UsernameTaken,
)
from backend.storage.data_sources import DataNote, DataSource, SourceNameTaken
from backend.storage.groups import Group, GroupNameTaken, Membership
from backend.storage.identities import IdentityTaken
from backend.storage.limit_values import UserLimits
from backend.storage.mcp_servers import McpServer, McpServerNameTaken
from backend.storage.sqlite import SQLiteStore
from backend.storage.usage import UsageCounts, UsageDay

__all__ = [
    "ROOT",
    "ApiKey",
    "Conversation",
    "ConversationNotFound",
    "DataNote",
    "DataSource",
    "Group",
    "GroupNameTaken",
    "IdentityTaken",
    "McpServer",
    "McpServerNameTaken",
    "Membership",
    "Message",
    "SessionOwnedByAnotherUser",
    "SourceNameTaken",
    "Store",
    "StoreBusy",
    "StoreFull",
    "StoreUnavailable",
    "UsageCounts",
    "UsageDay",
    "User",
    "UserLimits",
    "UsernameTaken",
    "open_store",
]


def open_store(database_url: str, data_dir: Path) -> Store:
    """Open the database named by DATABASE_URL (empty: SQLite in DATA_DIR)."""
    if not database_url:
        return SQLiteStore(data_dir / "app.db")
    if database_url.startswith("sqlite:///"):
        return SQLiteStore(Path(database_url.removeprefix("sqlite:///")))
    if is_postgres(database_url):
        from backend.storage.postgres import PostgresStore  # psycopg loads only when used

        return PostgresStore(database_url)
    raise ConfigError(
        "DATABASE_URL: expected postgresql://USER:PASSWORD@HOST:PORT/DB or sqlite:///PATH"
        " (or unset for SQLite in DATA_DIR)"
    )


def describe_database(database_url: str, data_dir: Path) -> dict[str, str]:
    """Which database, and where, for /health: never a password."""
    if is_postgres(database_url):
        from backend.storage.postgres import describe

        return {"kind": "postgresql", "location": describe(database_url)}
    path = database_url.removeprefix("sqlite:///") if database_url else data_dir / "app.db"
    return {"kind": "sqlite", "location": str(path)}


def is_postgres(database_url: str) -> bool:
    return database_url.startswith(("postgresql://", "postgres://"))
