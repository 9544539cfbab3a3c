"""The usage meter and the daily limits, on a real SQLite store with a fixed clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from backend.config import Settings
from backend.core.disk_usage import DiskUsage
from backend.core.limits import LimitReached, Limits
from backend.core.usage import UsageMeter, last_days, next_midnight, utc_day
from backend.storage import Store, UsageCounts, UserLimits, open_store

NOON = datetime(2026, 3, 1, 12, 0, tzinfo=UTC).timestamp()
TURN = UsageCounts(turns=1, llm_calls=2, prompt_tokens=900, completion_tokens=200)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store("", tmp_path)
    yield opened
    opened.close()


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_days_and_their_reset() -> None:
    assert utc_day(NOON) == "2026-03-01"
    assert next_midnight(NOON) == datetime(2026, 3, 2, tzinfo=UTC).timestamp()
    assert next_midnight(datetime(2026, 3, 2, tzinfo=UTC).timestamp()) == NOON + 36 * 3600
    assert last_days(NOON, 3) == ["2026-02-27", "2026-02-28", "2026-03-01"]


def test_pending_usage_counts_before_and_after_it_is_written(store: Store) -> None:
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    clock = Clock(NOON)
    meter = UsageMeter(store, clock)
    meter.add(alice.id, TURN)
    assert meter.today(alice.id) == TURN and store.usage_on("2026-03-01") == {}
    meter.flush()
    meter.add(alice.id, TURN)
    assert meter.today(alice.id) == TURN + TURN  # one written, one pending
    assert meter.today(bob.id) == UsageCounts()
    clock.now += 86400  # the next day starts at zero
    assert meter.today(alice.id) == UsageCounts()
    meter.add(alice.id, TURN)
    days = meter.days(alice.id, last_days(clock.now, 3))
    assert [(d.day, d.counts) for d in days] == [
        ("2026-02-28", UsageCounts()),
        ("2026-03-01", TURN + TURN),
        ("2026-03-02", TURN),
    ]


def test_a_failed_write_keeps_the_usage_for_the_next(store: Store) -> None:
    alice = store.create_user("alice", "h")
    meter = UsageMeter(store, Clock(NOON))
    meter.add(alice.id, TURN)
    adding = store.add_usage

    def broken(amounts: object) -> None:
        raise RuntimeError("database gone")

    store.add_usage = broken  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        meter.flush()
    assert meter.today(alice.id) == TURN
    store.add_usage = adding  # type: ignore[method-assign]
    meter.flush()
    assert store.usage_on("2026-03-01") == {alice.id: TURN}


async def test_the_daily_limits_name_the_setting_and_the_reset(
    store: Store, tmp_path: Path
) -> None:
    settings = Settings(DATA_DIR=tmp_path, USER_MAX_TOKENS_PER_DAY=1000)
    alice = store.create_user("alice", "h")
    meter = UsageMeter(store, Clock(NOON))
    limits = Limits(settings, store, DiskUsage(tmp_path), meter)
    await limits.check_daily(alice)  # nothing used yet
    meter.add(alice.id, TURN)
    with pytest.raises(LimitReached) as refused:
        await limits.check_daily(alice)
    assert refused.value.status_code == 429 and refused.value.code == "daily_token_limit"
    assert refused.value.retry_after == 12 * 3600
    assert refused.value.message == (
        "You have used 1,100 model tokens today, your daily limit of 1,000 "
        "(USER_MAX_TOKENS_PER_DAY). It resets at 00:00 UTC (2026-03-02T00:00Z), in 12 h 00 min; "
        "an admin may raise your limit."
    )
    await limits.check_daily(alice, tokens=False)  # code alone is not stopped by tokens
    # An admin's 0 lifts the server's limit for this user; their sandbox limit applies.
    unlimited = store.update_user(
        alice.id, limits=UserLimits(max_tokens_per_day=0, max_sandbox_seconds_per_day=2)
    )
    assert unlimited is not None
    await limits.check_daily(unlimited)
    # The limit counts the wall time the server measured: a run that reported no CPU at all
    # (its code could forge that) is still stopped.
    meter.add(alice.id, UsageCounts(sandbox_runs=1, sandbox_wall_seconds=2.5))
    with pytest.raises(LimitReached, match=r"2\.5 sandbox seconds .* limit of 2 \(USER_MAX_"):
        await limits.check_daily(unlimited)
    await limits.check_daily(unlimited, sandbox=False)  # plain chat runs no code
