"""A set of limit values as an admin sets them, on a user or on a group: None means
"no say" (the group's other values, or the server's USER_* setting, decide)."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class UserLimits:
    """An admin's limits for one user (or one group); None means the server's default."""

    max_sandboxes: int | None = None  # warm sandboxes
    max_runs: int | None = None  # concurrent agent runs
    max_disk_mb: int | None = None  # workspace disk
    max_tokens_per_day: int | None = None  # prompt and completion tokens, per UTC day
    max_sandbox_seconds_per_day: int | None = None  # sandbox CPU seconds, per UTC day


LIMIT_COLUMNS = tuple(field.name for field in fields(UserLimits))


def limits_from_row(row: object) -> UserLimits:
    """The limit columns of a `users` or `user_groups` row."""
    values = []
    for column in LIMIT_COLUMNS:
        try:
            value = row[column]  # type: ignore[index]
        except (IndexError, KeyError):  # a store opened on an older schema lacks it
            value = None
        values.append(None if value is None else int(value))
    return UserLimits(*values)
