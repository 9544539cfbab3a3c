"""The governor's places per user in the store, on SQLite and on a real PostgreSQL: a
user's share holds when servers take places at once, expired places free themselves,
and a server that starts again frees what its last life held."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from backend.storage import Store, open_store


@pytest.fixture
def store(database_url: str, tmp_path: Path) -> Iterator[Store]:
    opened = open_store(database_url, tmp_path)
    yield opened
    opened.close()


def _take(store: Store, place: str, user_id: int, server: str, **more: Any) -> bool:
    options: dict[str, Any] = {"per_user": 2, "now": 1000.0, "expires_at": 2000.0} | more
    return store.take_work_place(place, "table_query", user_id, server, **options)


def test_a_users_places_are_counted_across_servers(store: Store) -> None:
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    # Twenty takes at once, from "servers" in threads: exactly the share is given.
    with ThreadPoolExecutor(8) as pool:
        taken = list(pool.map(lambda n: _take(store, f"p{n}", alice.id, f"s{n % 3}"), range(20)))
    assert sum(taken) == 2
    assert _take(store, "bob-1", bob.id, "s0")  # another user's are their own
    assert not _take(store, "third", alice.id, "s0")
    assert store.take_work_place(
        "q", "export", alice.id, "s0", per_user=1, now=1000.0, expires_at=2000.0
    )  # another kind of work is counted apart

    given = [f"p{n}" for n, ok in enumerate(taken) if ok]
    store.release_work_place(given[0])
    assert _take(store, "again", alice.id, "s1")


def test_places_expire_and_a_restarted_server_frees_its_own(store: Store) -> None:
    alice = store.create_user("alice", "h")
    assert _take(store, "a", alice.id, "dead", expires_at=1500.0)
    assert _take(store, "b", alice.id, "live")
    assert not _take(store, "c", alice.id, "live")
    assert _take(store, "c", alice.id, "live", now=1600.0)  # the dead server's has expired
    assert store.release_server_work_places("live") == 2
    assert _take(store, "d", alice.id, "live", now=1600.0)


def test_a_deleted_user_gets_no_place(store: Store) -> None:
    assert not _take(store, "a", 424242, "s0")
