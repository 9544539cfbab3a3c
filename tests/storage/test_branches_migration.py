"""Migration 6 on SQLite and PostgreSQL: messages stored before branches follow the one
stored before them in their conversation, so every old conversation is one branch."""

from __future__ import annotations

from pathlib import Path

import pytest

from backend.storage import open_store, sql_store
from backend.storage.message_tree import MessageTree
from backend.storage.migrations import MIGRATIONS
from backend.storage.sql_store import SQLStore


def test_old_messages_become_one_branch_per_conversation(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql_store, "MIGRATIONS", MIGRATIONS[:5])
    old = open_store(database_url, tmp_path)
    assert isinstance(old, SQLStore) and old.schema_version() == 5
    user = old.create_user("alice", "h")
    one = old.conversation_for_session(user.id, "u1-one", "One")
    two = old.conversation_for_session(user.id, "u1-two", "Two")
    with old.database.transaction() as db:  # interleaved, as two tabs would write them
        for conversation, text in [(one, "q1"), (two, "r1"), (one, "a1"), (two, "s1"), (one, "q2")]:
            db.execute(
                "INSERT INTO messages (conversation_id, role, content, metadata, created_at)"
                " VALUES (?, 'user', ?, '{}', 0)",
                (conversation.id, text),
            )
    old.close()
    monkeypatch.setattr(sql_store, "MIGRATIONS", MIGRATIONS)
    store = open_store(database_url, tmp_path)
    try:
        for conversation, texts in ((one, ["q1", "a1", "q2"]), (two, ["r1", "s1"])):
            messages = store.list_messages(conversation.id)
            tree = MessageTree(messages)
            assert [m.content for m in tree.path(tree.latest)] == texts
            assert not tree.forks() and messages[0].parent_id is None
    finally:
        store.close()
