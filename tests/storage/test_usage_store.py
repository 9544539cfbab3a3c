"""Usage per user and day in the store, on SQLite and on a real PostgreSQL: amounts add
up atomically, users are counted apart, the daily limits are kept on the user."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from backend.storage import Store, UsageCounts, UsageDay, UserLimits, open_store


@pytest.fixture
def store(database_url: str, tmp_path: Path) -> Iterator[Store]:
    opened = open_store(database_url, tmp_path)
    yield opened
    opened.close()


TURN = UsageCounts(turns=1, llm_calls=2, prompt_tokens=100, completion_tokens=20)
RUN = UsageCounts(sandbox_runs=1, sandbox_cpu_seconds=0.25, sandbox_wall_seconds=0.5)


def test_usage_adds_up_per_user_and_day(store: Store) -> None:
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    store.add_usage([(alice.id, "2026-01-01", TURN), (alice.id, "2026-01-01", RUN)])
    store.add_usage([(alice.id, "2026-01-02", TURN), (bob.id, "2026-01-02", RUN)])

    assert store.usage_days(alice.id, "2026-01-01") == [
        UsageDay("2026-01-01", TURN + RUN),
        UsageDay("2026-01-02", TURN),
    ]
    assert store.usage_days(alice.id, "2026-01-02") == [UsageDay("2026-01-02", TURN)]
    assert store.usage_days(bob.id, "2000-01-01") == [UsageDay("2026-01-02", RUN)]
    assert store.usage_totals(alice.id) == {alice.id: TURN + TURN + RUN}
    assert store.usage_totals() == {alice.id: TURN + TURN + RUN, bob.id: RUN}
    assert store.usage_on("2026-01-02") == {alice.id: TURN, bob.id: RUN}
    assert store.usage_on("2026-01-03") == {}
    assert (TURN + TURN).tokens == 240


def test_concurrent_adds_lose_nothing(store: Store) -> None:
    alice = store.create_user("alice", "h")
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: store.add_usage([(alice.id, "2026-01-01", TURN)]), range(40)))
    (day,) = store.usage_days(alice.id, "2026-01-01")
    assert day.counts.turns == 40 and day.counts.tokens == 40 * 120


def test_a_deleted_users_usage_goes_and_adds_nothing(store: Store) -> None:
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    store.add_usage([(alice.id, "2026-01-01", TURN)])
    assert store.delete_user(alice.id)
    store.add_usage([(alice.id, "2026-01-01", TURN), (bob.id, "2026-01-01", RUN)])
    assert store.usage_days(alice.id, "2000-01-01") == []
    assert store.usage_totals() == {bob.id: RUN}
    store.add_usage([(999_999, "2026-01-01", TURN)])  # never a user: nothing, no error
    assert store.usage_on("2026-01-01") == {bob.id: RUN}


def test_daily_limits_are_kept_with_the_others(store: Store) -> None:
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    limits = UserLimits(
        max_runs=1, max_tokens_per_day=5_000_000_000, max_sandbox_seconds_per_day=60
    )
    limited = store.update_user(alice.id, limits=limits)
    assert limited is not None and limited.limits == limits
    assert store.get_user_by_id(alice.id) == limited
    assert store.get_user_by_id(bob.id) == bob
    cleared = store.update_user(alice.id, limits=UserLimits())
    assert cleared is not None and cleared.limits == UserLimits()
