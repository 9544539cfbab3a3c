"""Migration 4 on SQLite and PostgreSQL: stored session ids become owner-namespaced keys,
a row with an id no route should have let in is quarantined and never served, and the
old workspace folders are renamed to their keys at start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.storage import open_store, sql_store
from backend.storage.legacy_sessions import adopt_legacy_workspaces
from backend.storage.migrate import copy_store
from backend.storage.migrations import MIGRATIONS
from backend.storage.sql_store import SQLStore
from backend.storage.workspaces import Workspaces
from tests.support.postgres import PostgresServer


def _version_3_store(database_url: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database as the server before migration 4 left it, with a good and a bad session
    (written in SQL: today's store methods expect today's columns)."""
    monkeypatch.setattr(sql_store, "MIGRATIONS", MIGRATIONS[:3])
    old = open_store(database_url, data_dir)
    assert isinstance(old, SQLStore) and old.schema_version() == 3
    with old.database.transaction() as db:
        db.execute(
            "INSERT INTO users (id, username, password_hash, is_admin, created_at)"
            " VALUES (1, 'alice', 'h', 0, 0)"
        )
        for conversation, session, title in (
            ("c-good", "analysis", "Good"),
            ("c-bad", "..", "Stored through the tus hole"),
        ):
            db.execute(
                "INSERT INTO conversations (id, user_id, session_id, title, created_at,"
                " updated_at) VALUES (?, 1, ?, ?, 0, 0)",
                (conversation, session, title),
            )
        db.execute(
            "INSERT INTO messages (conversation_id, role, content, created_at)"
            " VALUES ('c-good', 'user', 'hello', 0), ('c-bad', 'user', 'read the secret key', 0)"
        )
        db.execute(
            "INSERT INTO session_steps (session_id, step, created_at) VALUES (?, ?, 0)",
            ("analysis", json.dumps({"kind": "code", "code": "x = 1"})),
        )
    old.close()
    monkeypatch.undo()


def test_session_ids_become_keys_and_bad_ones_are_quarantined(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    _version_3_store(database_url, data_dir, monkeypatch)
    workspaces = Workspaces(data_dir)
    (workspaces.root / "analysis" / "uploads").mkdir(parents=True)
    (workspaces.root / "analysis" / "uploads" / "a.csv").write_text("a\n1\n")

    store = open_store(database_url, data_dir)
    try:
        assert isinstance(store, SQLStore) and store.schema_version() == len(MIGRATIONS)
        alice = store.get_user("alice")
        assert alice is not None
        (kept,) = store.list_conversations(alice.id)  # the bad one is never served
        assert (kept.title, kept.session_key, kept.session_id) == (
            "Good",
            "u1-analysis",
            "analysis",
        )
        assert store.session_owner("..") is None
        assert [m.content for m in store.list_messages(kept.id)] == ["hello"]
        assert store.list_session_steps("u1-analysis") == [{"kind": "code", "code": "x = 1"}]
        with store.database.reading() as db:  # type: ignore[attr-defined]
            quarantined = db.execute("SELECT session_id, title FROM quarantined_conversations")
            rows = [(row["session_id"], row["title"]) for row in quarantined.fetchall()]
            assert rows == [("..", "Stored through the tus hole")]
            texts = db.execute("SELECT content FROM quarantined_messages").fetchall()
            assert [row["content"] for row in texts] == ["read the secret key"]

        assert adopt_legacy_workspaces(store, workspaces) == 1
        assert (workspaces.path("u1-analysis") / "uploads" / "a.csv").read_text() == "a\n1\n"
        assert not (workspaces.root / "analysis").exists()
        assert store.legacy_sessions() == []
        assert adopt_legacy_workspaces(store, workspaces) == 0  # once
    finally:
        store.close()


def test_a_key_is_the_only_name_a_workspace_answers_to(tmp_path: Path) -> None:
    workspaces = Workspaces(tmp_path)
    for name in ("..", "", "/", "a/../..", "analysis", "u1-..", "u1-a/b", "u-a", "u1-\x00"):
        with pytest.raises(ValueError):
            workspaces.path(name)
    assert workspaces.ensure("u1-analysis") == tmp_path / "scratch" / "u1-analysis"


def test_the_copy_to_postgresql_keeps_what_migration_4_set_aside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, postgres_server: PostgresServer
) -> None:
    """Copied before the server ever started on the new schema: the workspaces still to
    rename and the quarantined rows come along."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    source = f"sqlite:///{data_dir / 'app.db'}"
    _version_3_store(source, data_dir, monkeypatch)
    url = postgres_server.new_database()
    copied = copy_store(data_dir / "app.db", url)
    assert copied["legacy_sessions"] == 1 and copied["quarantined_conversations"] == 1
    store = open_store(url, data_dir)
    try:
        assert store.legacy_sessions() == [("analysis", "u1-analysis")]
        assert store.session_owner("u1-analysis") == 1
    finally:
        store.close()
