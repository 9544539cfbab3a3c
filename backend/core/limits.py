"""What one user may hold at once, or use per day: an admin's value on the user, else the
most generous of their groups', else the server's USER_* setting.

Every check of a per-user limit (sandboxes, agent runs, disk, tokens and sandbox time
per UTC day) reads it here, so an
override set through the admin API applies everywhere at once. A refusal is a
`LimitReached`, which every API answers in its own error shape (429 or 507).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from backend.config import Settings
from backend.core.disk_usage import DiskUsage
from backend.core.run_slots import RunSlot, RunSlots
from backend.core.usage import UsageMeter, next_midnight
from backend.storage import Group, Store, User, UserLimits
from backend.storage.sessions import SessionKey, owner_of

MEGABYTE = 1024 * 1024


@dataclass(frozen=True)
class EffectiveLimits:
    max_sandboxes: int  # warm sandboxes
    max_runs: int  # concurrent agent turns
    max_disk_mb: int  # all of the user's workspaces
    max_tokens_per_day: int  # 0: unlimited
    max_sandbox_seconds_per_day: int  # seconds the user's code ran; 0: unlimited


class LimitReached(Exception):
    """A per-user (or host) limit refuses the request; `status_code` is 429 or 507."""

    def __init__(
        self, status_code: int, message: str, code: str, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.code = code
        self.retry_after = retry_after


def limits_of(
    settings: Settings, user: User | None, groups: Sequence[Group] = ()
) -> EffectiveLimits:
    """`user`'s limits: each of the admin's values on the user, else the most generous of
    their `groups`' values, else the server's default."""
    own = user.limits if user is not None else UserLimits()
    given = [group.limits for group in groups]
    return EffectiveLimits(
        max_sandboxes=_pick(own.max_sandboxes, given, "max_sandboxes", settings.USER_MAX_SANDBOXES),
        max_runs=_pick(own.max_runs, given, "max_runs", settings.USER_MAX_RUNS),
        max_disk_mb=_pick(own.max_disk_mb, given, "max_disk_mb", settings.USER_MAX_DISK_MB),
        max_tokens_per_day=_pick(
            own.max_tokens_per_day,
            given,
            "max_tokens_per_day",
            settings.USER_MAX_TOKENS_PER_DAY,
            zero_is_unlimited=True,
        ),
        max_sandbox_seconds_per_day=_pick(
            own.max_sandbox_seconds_per_day,
            given,
            "max_sandbox_seconds_per_day",
            settings.USER_MAX_SANDBOX_SECONDS_PER_DAY,
            zero_is_unlimited=True,
        ),
    )


def _resets(reset: float, now: float) -> str:
    return (
        f"It resets at 00:00 UTC ({datetime.fromtimestamp(reset, UTC):%Y-%m-%dT%H:%MZ}), "
        f"in {_duration(reset - now)}; an admin may raise your limit."
    )


def _pick(
    override: int | None,
    groups: list[UserLimits],
    name: str,
    default: int,
    *,
    zero_is_unlimited: bool = False,
) -> int:
    if override is not None:
        return override
    values: list[int] = [v for limits in groups if (v := getattr(limits, name)) is not None]
    if not values:
        return default
    if zero_is_unlimited and 0 in values:
        return 0
    return max(values)


class Limits:
    """Every per-user limit, resolved and checked: agent runs, disk, and the sandboxes'
    cap for the pool (which knows only a session key's owner)."""

    def __init__(
        self, settings: Settings, store: Store, disk: DiskUsage, usage: UsageMeter
    ) -> None:
        self.settings = settings
        self.store = store
        self.disk = disk
        self.usage = usage
        self.runs = RunSlots()

    def of(self, user: User) -> EffectiveLimits:
        """`user`'s limits now (their groups are read: a membership ended counts at once)."""
        return limits_of(self.settings, user, self.store.groups_of(user.id))

    def of_id(self, user_id: int) -> EffectiveLimits:
        user = self.store.get_user_by_id(user_id)
        return limits_of(self.settings, user, self.store.groups_of(user_id) if user else [])

    def max_sandboxes(self, user_id: int) -> int:
        return self.of_id(user_id).max_sandboxes

    async def take_run(self, user: User) -> RunSlot:
        """A place for one more of `user`'s agent turns, or a 429."""
        limit = (await asyncio.to_thread(self.of, user)).max_runs  # their groups are read
        slot = self.runs.take(user.id, limit)
        if slot is None:
            raise LimitReached(
                429,
                f"You already have {limit} agent run{'s' if limit != 1 else ''} going, the "
                "most you may have at once (USER_MAX_RUNS): wait for one to finish or stop "
                "one, then try again.",
                "too_many_runs",
            )
        return slot

    def disk_left(self, user: User) -> tuple[int, int]:
        """(bytes the user may still write, their quota in MB); walks when stale."""
        quota_mb = self.of(user).max_disk_mb
        return quota_mb * MEGABYTE - self.disk.used(user.id), quota_mb

    def disk_left_for(self, key: SessionKey) -> int:
        """Bytes the owner of the session `key` may still write (walks when stale)."""
        user_id = owner_of(key)
        return self.quota_bytes(user_id) - self.disk.used(user_id)

    def quota_bytes(self, user_id: int) -> int:
        """The user's disk quota (reads the store)."""
        return self.of_id(user_id).max_disk_mb * MEGABYTE

    async def check_disk_for_run(self, user: User) -> None:
        """A 507 when the user's quota is used up: a run could write nothing."""
        left, quota_mb = await asyncio.to_thread(self.disk_left, user)
        if left <= 0:
            used = (quota_mb * MEGABYTE - left) / MEGABYTE
            raise LimitReached(
                507,
                f"Your disk quota is full: your sessions use {used:.0f} MB of your "
                f"{quota_mb} MB (USER_MAX_DISK_MB). Delete files or sessions you no longer "
                "need, or ask an admin to raise your quota, then try again.",
                "disk_quota_exceeded",
            )
        self.disk.changed(user.id)  # the run writes an amount nobody knows: walk again next time

    async def check_daily(
        self, user: User, *, tokens: bool = True, sandbox: bool = True
    ) -> int | None:
        """A 429 when the user has used up today's tokens (`tokens`: the request may call
        the model) or today's sandbox seconds (`sandbox`: it may run code); it names the
        limit and when it resets. Returns the tokens left today (None: no limit), which a
        turn checks as it goes (`tokens_past`)."""
        limits = await asyncio.to_thread(self.of, user)  # their groups are read
        max_tokens = limits.max_tokens_per_day if tokens else 0
        seconds = limits.max_sandbox_seconds_per_day if sandbox else 0
        if not max_tokens and not seconds:
            return None
        used = await asyncio.to_thread(self.usage.today, user.id)
        if max_tokens and used.tokens >= max_tokens:
            raise self.tokens_past(used.tokens, max_tokens)
        if seconds and used.sandbox_wall_seconds >= seconds:
            now = self.usage.clock()
            reset = next_midnight(now)
            raise LimitReached(
                429,
                f"Your code has run for {used.sandbox_wall_seconds:,.1f} sandbox seconds today, "
                f"your daily limit of {seconds:,} (USER_MAX_SANDBOX_SECONDS_PER_DAY). "
                f"{_resets(reset, now)}",
                "daily_sandbox_limit",
                retry_after=reset - now,
            )
        return max_tokens - used.tokens if max_tokens else None

    def tokens_past(self, used: int, max_tokens: int) -> LimitReached:
        """The 429 of a user whose tokens today (`used`) reached their daily limit."""
        now = self.usage.clock()
        reset = next_midnight(now)
        return LimitReached(
            429,
            f"You have used {used:,} model tokens today, your daily limit of "
            f"{max_tokens:,} (USER_MAX_TOKENS_PER_DAY). {_resets(reset, now)}",
            "daily_token_limit",
            retry_after=reset - now,
        )


def _duration(seconds: float) -> str:
    minutes = max(1, round(seconds / 60))
    if minutes < 60:
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
