"""Accounts in the store, on SQLite and on a real PostgreSQL: disabling, limits,
deleting, signed-out tokens and API keys kept only as hashes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.core.security import api_key_hash
from backend.storage import Store, UserLimits, open_store
from backend.storage.migrations import MIGRATIONS
from backend.storage.sql_store import KEY_USE_RESOLUTION, SQLStore


@pytest.fixture
def store(database_url: str, tmp_path: Path) -> Iterator[Store]:
    opened = open_store(database_url, tmp_path)
    yield opened
    opened.close()


def test_users_are_listed_disabled_and_limited(store: Store) -> None:
    assert isinstance(store, SQLStore) and store.schema_version() == len(MIGRATIONS)
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    assert not alice.disabled and alice.limits == UserLimits()
    assert [u.username for u in store.list_users()] == ["alice", "bob"]

    disabled = store.update_user(bob.id, disabled=True)
    assert disabled is not None and disabled.disabled and disabled.limits == UserLimits()
    limits = UserLimits(max_sandboxes=2, max_runs=1, max_disk_mb=500)
    limited = store.update_user(bob.id, limits=limits)
    assert limited is not None and limited.disabled and limited.limits == limits
    assert store.get_user("bob") == limited  # read back as stored
    back = store.update_user(bob.id, disabled=False, limits=UserLimits(max_runs=3))
    assert back is not None and not back.disabled and back.limits == UserLimits(max_runs=3)
    assert store.get_user_by_id(alice.id) == alice  # the other user is untouched
    assert store.update_user(999_999, disabled=True) is None


def test_deleting_a_user_takes_their_conversations_and_keys(store: Store) -> None:
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    store.conversation_for_session(alice.id, "u1-s", "Alice's")
    store.conversation_for_session(bob.id, "u2-s", "Bob's")
    store.create_api_key(alice.id, "script", api_key_hash("pda-alice"))
    assert store.delete_user(alice.id)
    assert not store.delete_user(alice.id)
    assert store.get_user_by_id(alice.id) is None
    assert store.list_conversations(alice.id) == []
    assert store.list_api_keys(alice.id) == []
    assert store.user_for_api_key(api_key_hash("pda-alice"), time.time()) is None
    assert [c.title for c in store.list_conversations(bob.id)] == ["Bob's"]
    # Ids are never handed out again, so an old token cannot name a new user.
    assert store.create_user("alice", "h").id > bob.id


def test_a_revoked_token_id_finds_no_user(store: Store) -> None:
    alice = store.create_user("alice", "h")
    assert store.user_for_token(alice.id, "jti-1") == alice
    store.revoke_token("jti-1", time.time() + 3600)
    store.revoke_token("jti-1", time.time() + 3600)  # twice is harmless
    assert store.user_for_token(alice.id, "jti-1") is None
    assert store.user_for_token(alice.id, "jti-2") == alice
    assert store.user_for_token(999_999, "jti-2") is None


def test_expired_revocations_are_forgotten(store: Store) -> None:
    assert isinstance(store, SQLStore)
    store.revoke_token("old", time.time() - 1)
    store.revoke_token("new", time.time() + 3600)
    with store.database.reading() as db:
        rows = db.execute("SELECT token_id FROM revoked_tokens").fetchall()
    assert [row["token_id"] for row in rows] == ["new"]


def test_api_keys_are_found_by_hash_and_owned(store: Store) -> None:
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    first = store.create_api_key(alice.id, "notebook", api_key_hash("pda-one"))
    second = store.create_api_key(alice.id, "script", api_key_hash("pda-two"))
    assert first.last_used_at is None and first.user_id == alice.id
    assert [k.name for k in store.list_api_keys(alice.id)] == ["notebook", "script"]
    assert store.list_api_keys(bob.id) == []

    now = time.time()
    assert store.user_for_api_key(api_key_hash("pda-one"), now) == alice
    assert store.user_for_api_key(api_key_hash("pda-nope"), now) is None
    (used, unused) = store.list_api_keys(alice.id)
    assert used.last_used_at == pytest.approx(now) and unused.last_used_at is None
    # Used again within a minute: not rewritten; a minute later: it is.
    store.user_for_api_key(api_key_hash("pda-one"), now + 1)
    assert store.list_api_keys(alice.id)[0].last_used_at == pytest.approx(now)
    store.user_for_api_key(api_key_hash("pda-one"), now + KEY_USE_RESOLUTION)
    assert store.list_api_keys(alice.id)[0].last_used_at == pytest.approx(now + KEY_USE_RESOLUTION)

    assert not store.delete_api_key(bob.id, second.id)  # not bob's
    assert store.delete_api_key(alice.id, second.id)
    assert store.user_for_api_key(api_key_hash("pda-two"), now) is None
    assert [k.id for k in store.list_api_keys(alice.id)] == [first.id]


def test_only_the_hash_of_a_key_is_stored(store: Store) -> None:
    assert isinstance(store, SQLStore)
    alice = store.create_user("alice", "h")
    store.create_api_key(alice.id, "script", api_key_hash("pda-secret-key"))
    with store.database.reading() as db:
        (row,) = db.execute("SELECT * FROM api_keys").fetchall()
    assert "pda-secret-key" not in [str(value) for value in dict(row).values()]
    assert row["key_hash"] == api_key_hash("pda-secret-key")


def test_ending_credentials_moves_the_epoch_on_and_deletes_only_that_users_keys(
    store: Store,
) -> None:
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    assert alice.credentials_epoch == 0
    store.create_api_key(alice.id, "script", api_key_hash("pda-alice"))
    store.create_api_key(bob.id, "script", api_key_hash("pda-bob"))

    ended = store.end_credentials(alice.id)
    assert ended is not None and ended.credentials_epoch == 1
    assert store.get_user_by_id(alice.id) == ended
    assert store.list_api_keys(alice.id) == []
    assert store.user_for_api_key(api_key_hash("pda-alice"), time.time()) is None
    assert store.user_for_api_key(api_key_hash("pda-bob"), time.time()) == bob
    assert store.end_credentials(999_999) is None

    # A new password, with and without ending the rest, in one transaction.
    store.create_api_key(alice.id, "kept", api_key_hash("pda-kept"))
    kept = store.set_password_hash(alice.id, "h2")
    assert kept is not None and (kept.password_hash, kept.credentials_epoch) == ("h2", 1)
    assert [k.name for k in store.list_api_keys(alice.id)] == ["kept"]
    reset = store.set_password_hash(alice.id, "h3", end_credentials=True)
    assert reset is not None and (reset.password_hash, reset.credentials_epoch) == ("h3", 2)
    assert store.list_api_keys(alice.id) == []
    assert store.get_user_by_id(bob.id) == bob
