"""Usage per user: each user reads their own, an admin everyone's.

Handlers are plain functions, so FastAPI runs them in its thread pool: they write the
pending usage and read the store and the disk off the event loop.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

from fastapi import APIRouter, Query

from backend.api.deps import CurrentAdmin, CurrentUser, LimitsDep, RecordId, StoreDep
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.core.limits import Limits
from backend.core.usage import last_days, next_midnight, utc_day
from backend.models.usage import (
    DailyLimits,
    FeedbackTally,
    UsageAmounts,
    UsageDayPublic,
    UsageOverview,
    UserUsage,
    UserUsageSummary,
)
from backend.storage import UsageCounts, User
from backend.storage.feedback import FeedbackCounts

router = APIRouter(prefix="/api", tags=["usage"], responses=CLIENT_ERRORS)

Days = Annotated[int, Query(ge=1, le=366, description="how many UTC days, today the last")]


def _amounts(counts: UsageCounts) -> UsageAmounts:
    return UsageAmounts(**dataclasses.asdict(counts), tokens=counts.tokens)


def _tallies(counts: dict[str, FeedbackCounts]) -> dict[str, FeedbackTally]:
    return {model: FeedbackTally(up=c.up, down=c.down) for model, c in counts.items()}


def _limits(limits: Limits, user: User) -> DailyLimits:
    own = limits.of(user)
    return DailyLimits(
        max_tokens_per_day=own.max_tokens_per_day,
        max_sandbox_seconds_per_day=own.max_sandbox_seconds_per_day,
        max_disk_mb=own.max_disk_mb,
    )


def _usage(limits: Limits, user: User, days: int) -> UserUsage:
    now = limits.usage.clock()
    per_day = [
        UsageDayPublic(day=d.day, **_amounts(d.counts).model_dump())
        for d in limits.usage.days(user.id, last_days(now, days))
    ]
    total = limits.store.usage_totals(user.id).get(user.id, UsageCounts())
    return UserUsage(
        user_id=user.id,
        username=user.username,
        today=per_day[-1],
        days=per_day,
        total=_amounts(total),
        disk_bytes=limits.disk.used(user.id),
        limits=_limits(limits, user),
        resets_at=next_midnight(now),
        feedback=_tallies(limits.store.feedback_counts(user.id)),
    )


@router.get("/users/me/usage")
def read_my_usage(user: CurrentUser, limits: LimitsDep, days: Days = 14) -> UserUsage:
    """Your usage: today, each of the last `days` UTC days, in total; your disk and limits."""
    return _usage(limits, user, days)


@router.get("/users/{user_id}/usage")
def read_user_usage(
    user_id: RecordId, user: CurrentUser, store: StoreDep, limits: LimitsDep, days: Days = 14
) -> UserUsage:
    """A user's usage (admin only, or yourself)."""
    if user_id != user.id and not user.is_admin:
        raise ApiError(403, "Only an admin can read another user's usage.", code="forbidden")
    target = store.get_user_by_id(user_id)
    if target is None:
        raise ApiError(404, "User not found.", code="user_not_found")
    return _usage(limits, target, days)


@router.get("/usage")
def read_usage(admin: CurrentAdmin, store: StoreDep, limits: LimitsDep) -> UsageOverview:
    """Every user's usage today and in total, oldest user first (admin only)."""
    limits.usage.flush()
    day = utc_day(limits.usage.clock())
    today, totals = store.usage_on(day), store.usage_totals()
    return UsageOverview(
        day=day,
        users=[
            UserUsageSummary(
                user_id=user.id,
                username=user.username,
                today=_amounts(today.get(user.id, UsageCounts())),
                total=_amounts(totals.get(user.id, UsageCounts())),
                limits=_limits(limits, user),
            )
            for user in store.list_users()
        ],
        feedback=_tallies(store.feedback_counts()),
    )
