"""Users' paces (issue 40): one budget per user, of a download's bytes per second or of
seconds of work per second, shared by that user's work of a kind and by nobody else's; a
burst of it may go at once (a quarter second's bytes, half a second of work), and idle time is not
saved up for later."""

from __future__ import annotations

import pytest

from backend.config import ConfigError, load_settings
from backend.core.governor import Governor
from backend.core.pace import BURST_SECONDS, Pace

MB = 1024 * 1024


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_user_waits_once_past_a_quarter_second_of_their_pace() -> None:
    clock = Clock()
    pace = Pace(4 * MB, clock)
    assert pace.due(1, MB) == 0  # a quarter of a second's worth goes at once
    assert pace.due(1, MB) == pytest.approx(0.25)
    assert pace.due(1, 2 * MB) == pytest.approx(0.75)
    clock.now += 0.75  # they waited: the next megabyte is due a quarter second on
    assert pace.due(1, MB) == pytest.approx(0.25)


def test_one_users_bytes_never_delay_another_user() -> None:
    clock = Clock()
    pace = Pace(4 * MB, clock)
    assert pace.due(1, 40 * MB) == pytest.approx(10 - BURST_SECONDS)  # the hoarder
    assert pace.due(2, MB) == 0  # the neighbour's budget is their own
    assert pace.due(2, MB) == pytest.approx(0.25)
    assert pace.due(1, MB) == pytest.approx(10.25 - BURST_SECONDS)


def test_idle_time_is_not_saved_up() -> None:
    clock = Clock()
    pace = Pace(4 * MB, clock)
    pace.due(1, MB)
    clock.now += 3600  # an hour without a download buys no burst of an hour's bytes
    assert pace.due(1, MB) == 0
    assert pace.due(1, 4 * MB) == pytest.approx(1.0)


def test_users_whose_budget_is_whole_are_forgotten() -> None:
    clock = Clock()
    pace = Pace(4 * MB, clock)
    for user_id in range(1000):
        pace.due(user_id, MB)
    clock.now += 1
    pace.due(5000, 1)
    assert len(pace._free_at) == 1


def test_no_pace_is_no_wait() -> None:
    pace = Pace(0, Clock())
    assert pace.due(1, 10**12) == 0


async def test_a_users_downloads_share_one_pace_and_other_kinds_have_none() -> None:
    settings = load_settings(WORK_LIMITS={"table_download": {"mb_per_second": 8}})
    governor = Governor(settings)
    async with (
        governor.hold("table_download", 1) as first,
        governor.hold("table_download", 1) as second,
        governor.hold("table_query", 1) as query,
    ):
        assert first.pace is second.pace is not None
        assert first.pace.rate == 8 * MB
        assert (first.user_id, second.user_id) == (1, 1)
        assert query.pace is None
        await query.sent(10**12)  # nothing to wait for
        await first.sent(2 * MB)  # a quarter second's worth: at once
        assert second.pace.due(1, MB) == pytest.approx(0.125, abs=0.05)  # the same budget
        assert second.pace.due(2, MB) == 0  # not another user's
    unpaced = Governor(load_settings(WORK_LIMITS={"table_download": {"mb_per_second": 0}}))
    async with unpaced.hold("table_download", 1) as held:
        assert held.pace is None


def test_a_pace_for_work_that_sends_no_download_is_refused() -> None:
    with pytest.raises(ConfigError, match="mb_per_second is for table_download"):
        load_settings(WORK_LIMITS={"export": {"mb_per_second": 5}})
    with pytest.raises(ConfigError, match="mb_per_second"):
        load_settings(WORK_LIMITS={"table_download": {"mb_per_second": -1}})
