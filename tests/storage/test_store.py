"""The store, on SQLite and on a real PostgreSQL: ownership, ordering, durability
across reopen, the shared migrations, and each database's own failure modes."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from backend.config import ConfigError, load_settings
from backend.core.accounts import ensure_admin
from backend.core.throttle import LoginThrottle, login_keys
from backend.storage import (
    ROOT,
    Conversation,
    ConversationNotFound,
    SessionOwnedByAnotherUser,
    Store,
    StoreBusy,
    User,
    UsernameTaken,
    open_store,
)
from backend.storage.message_tree import MessageTree
from backend.storage.migrations import MIGRATIONS, SQLITE, statements
from backend.storage.postgres import PostgresDatabase, PostgresStore
from backend.storage.sql_store import SQLStore
from backend.storage.sqlite import SQLiteStore
from tests.support.postgres import PostgresServer, free_port


@pytest.fixture
def store(database_url: str, tmp_path: Path) -> Iterator[Store]:
    opened = open_store(database_url, tmp_path)
    yield opened
    opened.close()


def test_users_are_unique(store: Store) -> None:
    alice = store.create_user("alice", "hash")
    assert store.get_user("alice") == alice
    assert store.get_user_by_id(alice.id) == alice
    with pytest.raises(UsernameTaken):
        store.create_user("alice", "other")


def test_session_belongs_to_its_first_user(store: Store) -> None:
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    first = store.conversation_for_session(alice.id, "s1", "Title")
    assert store.conversation_for_session(alice.id, "s1", "Other title") == first
    with pytest.raises(SessionOwnedByAnotherUser):
        store.conversation_for_session(bob.id, "s1", "Hijack")
    assert store.get_conversation(bob.id, first.id) is None
    assert not store.delete_conversation(bob.id, first.id)
    assert [c.id for c in store.list_conversations(alice.id)] == [first.id]
    assert store.list_conversations(bob.id) == []


def test_messages_keep_order_and_metadata_and_survive_reopen(
    database_url: str, tmp_path: Path
) -> None:
    store = open_store(database_url, tmp_path)
    user = store.create_user("alice", "h")
    conversation = store.conversation_for_session(user.id, "s1", "t")
    store.add_message(conversation.id, "user", "hi")
    store.add_message(conversation.id, "assistant", "hello", {"finish_reason": "stop"})
    store.close()

    reopened = open_store(database_url, tmp_path)
    messages = reopened.list_messages(conversation.id)
    reopened.close()
    assert [(m.role, m.content) for m in messages] == [("user", "hi"), ("assistant", "hello")]
    assert messages[1].metadata == {"finish_reason": "stop"}


def test_a_message_follows_the_latest_its_parent_or_nothing(store: Store) -> None:
    """Branches: without a parent a message follows the latest one; ROOT starts a branch."""
    user = store.create_user("alice", "h")
    conversation = store.conversation_for_session(user.id, "s1", "t")
    first = store.add_message(conversation.id, "user", "hi")
    answer = store.add_message(conversation.id, "assistant", "hello")
    edit = store.add_message(conversation.id, "user", "hello again", parent_id=ROOT)
    regenerated = store.add_message(conversation.id, "assistant", "hi!", parent_id=first.id)
    stored = {m.id: m.parent_id for m in store.list_messages(conversation.id)}
    assert stored == {first.id: None, answer.id: first.id, edit.id: None, regenerated.id: first.id}
    tree = MessageTree(store.list_messages(conversation.id))
    assert tree.siblings(answer.id) == [answer.id, regenerated.id]
    assert tree.leaves() == [answer.id, edit.id, regenerated.id] and tree.forks()
    assert [m.id for m in tree.path(tree.latest_leaf(first.id))] == [first.id, regenerated.id]


def test_deleting_a_conversation_deletes_its_messages(store: Store) -> None:
    user = store.create_user("alice", "h")
    conversation = store.conversation_for_session(user.id, "s1", "t")
    store.add_message(conversation.id, "user", "hi")
    assert store.delete_conversation(user.id, conversation.id)
    assert store.list_messages(conversation.id) == []


def test_session_steps_keep_order_and_go_with_their_conversation(store: Store) -> None:
    user = store.create_user("alice", "h")
    conversation = store.conversation_for_session(user.id, "s1", "t")
    store.add_session_step("s1", {"run_id": "run_1", "code": "x = 1"})
    store.add_session_step("s1", {"run_id": "run_2", "code": "print(x)"})
    assert [s["run_id"] for s in store.list_session_steps("s1")] == ["run_1", "run_2"]
    with pytest.raises(ConversationNotFound):
        store.add_session_step("nobody", {"run_id": "run_3"})
    assert store.delete_conversation(user.id, conversation.id)
    assert store.list_session_steps("s1") == []


def test_sqlite_database_is_in_wal_mode(tmp_path: Path) -> None:
    import sqlite3

    SQLiteStore(tmp_path / "app.db").close()
    mode = sqlite3.connect(tmp_path / "app.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_database_url_selects_the_store(tmp_path: Path) -> None:
    store = open_store(f"sqlite:///{tmp_path}/custom.db", tmp_path)
    assert (tmp_path / "custom.db").exists()
    store.close()
    with pytest.raises(ConfigError, match="DATABASE_URL: expected postgresql://"):
        open_store("mysql://db/app", tmp_path)


def test_a_turn_begins_in_one_transaction(store: Store) -> None:
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    conversation, history, _ = store.begin_turn(alice.id, "s1", "First", "hi", history=True)
    assert history == []  # a new session has none
    again, history, _ = store.begin_turn(alice.id, "s1", "Other", "and then?", history=True)
    assert again.id == conversation.id and again.title == "First"
    assert [(m.role, m.content) for m in history] == [("user", "hi")]  # before the new one
    assert [m.content for m in store.list_messages(conversation.id)] == ["hi", "and then?"]
    # Someone else's session: refused, and nothing of theirs is written.
    with pytest.raises(SessionOwnedByAnotherUser):
        store.begin_turn(bob.id, "s1", "Hijack", "mine now", history=True)
    assert len(store.list_messages(conversation.id)) == 2


def test_a_new_session_is_stored_with_its_first_message(store: Store) -> None:
    alice = store.create_user("alice", "h")
    conversation = Conversation.new(alice.id, "A title")
    assert store.list_conversations(alice.id) == []  # made, not stored
    store.start_conversation(conversation, "hello")
    (stored,) = store.list_conversations(alice.id)
    assert (stored.id, stored.session_key, stored.title) == (
        conversation.id,
        conversation.session_key,
        "A title",
    )
    assert store.session_owner(conversation.session_key) == alice.id
    assert [(m.role, m.content) for m in store.list_messages(conversation.id)] == [
        ("user", "hello")
    ]


def test_one_schema_version_table_records_the_migrations(store: Store) -> None:
    assert isinstance(store, SQLStore)
    assert store.schema_version() == len(MIGRATIONS)
    with store.database.reading() as db:
        assert len(db.execute("SELECT version FROM schema_version").fetchall()) == 1


def test_a_sqlite_database_from_before_schema_version_keeps_its_data(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "app.db"
    old = sqlite3.connect(path)  # what the server made before: migration 1 and user_version
    old.executescript(";".join(statements(1, SQLITE)) + "; PRAGMA user_version=1;")
    old.execute("INSERT INTO users VALUES (7, 'alice', 'h', 0, 1.0)")
    old.commit()
    old.close()
    store = SQLiteStore(path)
    assert store.schema_version() == len(MIGRATIONS) > 1  # the later ones ran on top
    assert store.get_user("alice") is not None  # migration 1 did not run again over it
    store.close()


def test_unfinished_turns_are_marked_interrupted(store: Store) -> None:
    user = store.create_user("alice", "h")
    conversation = store.conversation_for_session(user.id, "s1", "t")
    running = store.add_message(
        conversation.id, "assistant", "", {"finish_reason": "running", "server": "a"}
    )
    older = store.add_message(conversation.id, "assistant", "", {"finish_reason": "running"})
    elsewhere = store.add_message(
        conversation.id, "assistant", "", {"finish_reason": "running", "server": "b"}
    )
    done = store.add_message(conversation.id, "assistant", "ok", {"finish_reason": "stop"})
    # Server a restarts: its own turn and one from before servers were named; not b's.
    assert store.interrupt_unfinished("a") == 2
    assert store.interrupt_unfinished("a") == 0
    by_id = {m.id: m.metadata for m in store.list_messages(conversation.id)}
    assert by_id[running.id]["finish_reason"] == "interrupted"
    assert "stopped" in by_id[running.id]["error"] and "server" not in by_id[running.id]
    assert by_id[older.id]["finish_reason"] == "interrupted"
    assert by_id[elsewhere.id]["finish_reason"] == "running"
    assert by_id[done.id] == {"finish_reason": "stop"}


def test_postgres_servers_starting_together_migrate_once(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.new_database()
    with ThreadPoolExecutor(4) as pool:
        stores = list(pool.map(lambda _: PostgresStore(url), range(4)))
    assert {store.schema_version() for store in stores} == {len(MIGRATIONS)}
    stores[0].create_user("alice", "h")
    assert all(store.get_user("alice") for store in stores)
    for store in stores:
        store.close()


def test_an_unreachable_postgres_stops_start_up_in_one_line(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    wrong = postgres_server.url().replace(postgres_server.password, "wrong-password-1234")
    with pytest.raises(ConfigError, match="password authentication failed") as refused:
        open_store(wrong, tmp_path)
    closed = f"postgresql://u:secret-password-5678@127.0.0.1:{free_port()}/db"
    where = r"cannot connect to PostgreSQL at u@127\.0\.0\.1"
    with pytest.raises(ConfigError, match=where) as down:
        open_store(closed, tmp_path)
    for error in (refused, down):
        assert "\n" not in str(error.value)
        assert "password-" not in str(error.value)


def test_a_postgres_lock_held_elsewhere_is_store_busy(postgres_server: PostgresServer) -> None:
    url = postgres_server.new_database()
    store = SQLStore(PostgresDatabase(url, lock_timeout_ms=300))
    user = store.create_user("alice", "h")
    conversation = store.conversation_for_session(user.id, "s1", "t")
    with psycopg.connect(url) as other, other.transaction():
        other.execute("LOCK TABLE messages IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(StoreBusy):
            store.add_message(conversation.id, "user", "blocked")
    store.add_message(conversation.id, "user", "after the lock")  # the pool is fine after
    assert [m.content for m in store.list_messages(conversation.id)] == ["after the lock"]
    store.close()


def test_postgres_connections_dropped_by_the_server_are_replaced(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.new_database()
    store = PostgresStore(url)
    store.create_user("alice", "h")
    with psycopg.connect(url, autocommit=True) as admin:
        killed = admin.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert killed is not None and killed[0] >= 1
    assert store.get_user("alice") is not None  # a fresh connection, not an error
    store.close()


def test_login_failures_count_lock_and_clear(store: Store) -> None:
    now = 1_000.0
    assert [store.count_login_failure("user:a", now, 0) for _ in range(3)] == [1, 2, 3]
    store.lock_login("user:a", now + 5)
    store.lock_login("user:a", now + 2)  # a later, shorter lock never shortens it
    assert store.locked_until(["user:a", "addr:x"]) == now + 5
    assert store.locked_until(["addr:x"]) == 0
    store.clear_login_failures(["user:a", "addr:x"])
    assert store.locked_until(["user:a"]) == 0
    assert store.count_login_failure("user:a", now, 0) == 1
    # A key whose last failure is older than `forget_before` starts again.
    assert store.count_login_failure("user:b", now + 10, forget_before=now + 1) == 1
    assert store.count_login_failure("user:a", now + 10, forget_before=now + 1) == 1


def test_the_login_throttle_is_shared_by_servers_on_one_database(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.new_database()
    first, second = PostgresStore(url), PostgresStore(url)
    keys = login_keys("Alice", "10.0.0.1")
    on_first, on_second = LoginThrottle(first, free=2), LoginThrottle(second, free=2)
    on_first.failed(*keys)
    on_second.failed(*keys)
    assert on_first.retry_after(*keys) == 0  # two failures are free
    on_first.failed(*keys)  # the third, counted on top of the other server's
    assert on_second.retry_after(*keys) == 1
    on_second.succeeded(*keys)
    assert on_first.retry_after(*keys) == 0
    first.close()
    second.close()


def test_servers_starting_together_both_find_one_admin(postgres_server: PostgresServer) -> None:
    url = postgres_server.new_database()
    settings = load_settings(ADMIN_PASSWORD="shared-admin-password", DATABASE_URL=url)
    first, second = PostgresStore(url), PostgresStore(url)
    ensure_admin(first, settings)

    class LateStore(PostgresStore):
        """Looked before the other server created the admin, creates after it."""

        looked = False

        def get_user(self, username: str) -> User | None:
            if not self.looked:
                self.looked = True
                return None
            return super().get_user(username)

    late = LateStore(url)
    ensure_admin(late, settings)  # UsernameTaken is not a crash: it finds the admin
    admin = second.get_user("admin")
    assert admin is not None and admin.is_admin and late.looked
    for store in (first, second, late):
        store.close()
