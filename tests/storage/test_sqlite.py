"""The SQLite store: ownership, ordering, durability across reopen."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.config import ConfigError
from backend.storage import Conversation, SessionOwnedByAnotherUser, UsernameTaken, open_store
from backend.storage.sqlite import SQLiteStore


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(tmp_path / "app.db")


def test_users_are_unique(store: SQLiteStore) -> None:
    alice = store.create_user("alice", "hash")
    assert store.get_user("alice") == alice
    assert store.get_user_by_id(alice.id) == alice
    with pytest.raises(UsernameTaken):
        store.create_user("alice", "other")


def test_session_belongs_to_its_first_user(store: SQLiteStore) -> None:
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    first = store.conversation_for_session(alice.id, "s1", "Title")
    assert store.conversation_for_session(alice.id, "s1", "Other title") == first
    with pytest.raises(SessionOwnedByAnotherUser):
        store.conversation_for_session(bob.id, "s1", "Hijack")
    assert store.get_conversation(bob.id, first.id) is None
    assert not store.delete_conversation(bob.id, first.id)
    assert [c.id for c in store.list_conversations(alice.id)] == [first.id]
    assert store.list_conversations(bob.id) == []


def test_messages_keep_order_and_metadata_and_survive_reopen(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "app.db")
    user = store.create_user("alice", "h")
    conversation = store.conversation_for_session(user.id, "s1", "t")
    store.add_message(conversation.id, "user", "hi")
    store.add_message(conversation.id, "assistant", "hello", {"finish_reason": "stop"})
    store.close()

    reopened = SQLiteStore(tmp_path / "app.db")
    messages = reopened.list_messages(conversation.id)
    assert [(m.role, m.content) for m in messages] == [("user", "hi"), ("assistant", "hello")]
    assert messages[1].metadata == {"finish_reason": "stop"}


def test_deleting_a_conversation_deletes_its_messages(store: SQLiteStore) -> None:
    user = store.create_user("alice", "h")
    conversation = store.conversation_for_session(user.id, "s1", "t")
    store.add_message(conversation.id, "user", "hi")
    assert store.delete_conversation(user.id, conversation.id)
    assert store.list_messages(conversation.id) == []


def test_database_is_in_wal_mode(store: SQLiteStore, tmp_path: Path) -> None:
    import sqlite3

    mode = sqlite3.connect(tmp_path / "app.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_database_url_selects_the_store(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/custom.db", tmp_path)
    assert (tmp_path / "custom.db").exists()
    store.close()
    with pytest.raises(ConfigError, match="DATABASE_URL: PostgreSQL is not implemented"):
        open_store("postgresql://db/app", tmp_path)
    with pytest.raises(ConfigError, match="DATABASE_URL"):
        open_store("mysql://db/app", tmp_path)


def test_a_turn_begins_in_one_transaction(store: SQLiteStore) -> None:
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    conversation, history = store.begin_turn(alice.id, "s1", "First", "hi", history=True)
    assert history == []  # a new session has none
    again, history = store.begin_turn(alice.id, "s1", "Other", "and then?", history=True)
    assert again.id == conversation.id and again.title == "First"
    assert [(m.role, m.content) for m in history] == [("user", "hi")]  # before the new one
    assert [m.content for m in store.list_messages(conversation.id)] == ["hi", "and then?"]
    # Someone else's session: refused, and nothing of theirs is written.
    with pytest.raises(SessionOwnedByAnotherUser):
        store.begin_turn(bob.id, "s1", "Hijack", "mine now", history=True)
    assert len(store.list_messages(conversation.id)) == 2


def test_a_new_session_is_stored_with_its_first_message(store: SQLiteStore) -> None:
    alice = store.create_user("alice", "h")
    conversation = Conversation.new(alice.id, "A title")
    assert store.list_conversations(alice.id) == []  # made, not stored
    store.start_conversation(conversation, "hello")
    (stored,) = store.list_conversations(alice.id)
    assert (stored.id, stored.session_id, stored.title) == (
        conversation.id,
        conversation.session_id,
        "A title",
    )
    assert store.session_owner(conversation.session_id) == alice.id
    assert [(m.role, m.content) for m in store.list_messages(conversation.id)] == [
        ("user", "hello")
    ]
