"""What each user used, per UTC day (`usage_days` table): turns, model calls and tokens,
sandbox runs with their CPU and wall seconds.

Amounts are only ever added, each as one `INSERT ... ON CONFLICT DO UPDATE` that adds
to the day's row, so API servers sharing a database never lose each other's counts. A
user deleted meanwhile adds nothing (their rows went with them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from backend.storage.database import Database


@dataclass(frozen=True)
class UsageCounts:
    turns: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    sandbox_runs: int = 0
    sandbox_cpu_seconds: float = 0.0
    sandbox_wall_seconds: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: UsageCounts) -> UsageCounts:
        values: dict[str, Any] = {n: getattr(self, n) + getattr(other, n) for n in COLUMNS}
        return UsageCounts(**values)


@dataclass(frozen=True)
class UsageDay:
    day: str  # YYYY-MM-DD, UTC
    counts: UsageCounts


COLUMNS = tuple(f.name for f in dataclasses.fields(UsageCounts))
_SUMS = ", ".join(f"COALESCE(SUM({column}), 0) AS {column}" for column in COLUMNS)


def _counts(row: Any) -> UsageCounts:
    values: dict[str, Any] = {
        c: float(row[c]) if c.endswith("_seconds") else int(row[c]) for c in COLUMNS
    }
    return UsageCounts(**values)


class UsageRows:
    """The `Store`'s usage methods, over the SQL store's `database`."""

    database: Database

    def add_usage(self, amounts: Sequence[tuple[int, str, UsageCounts]]) -> None:
        """Add each (user id, day, counts) to that day's row, in one transaction."""
        names = ", ".join(COLUMNS)
        values = ", ".join("?" for _ in COLUMNS)
        added = ", ".join(f"{c} = usage_days.{c} + excluded.{c}" for c in COLUMNS)
        # Selected from `users`: a user deleted since adds nothing (no broken reference).
        sql = (
            f"INSERT INTO usage_days (user_id, day, {names})"
            f" SELECT id, ?, {values} FROM users WHERE id = ?"
            f" ON CONFLICT (user_id, day) DO UPDATE SET {added}"
        )
        with self.database.transaction() as db:
            for user_id, day, counts in amounts:
                db.execute(sql, (day, *dataclasses.astuple(counts), user_id))

    def usage_days(self, user_id: int, first_day: str) -> list[UsageDay]:
        """The user's days from `first_day` on, oldest first; days without use are absent."""
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT * FROM usage_days WHERE user_id = ? AND day >= ? ORDER BY day",
                (user_id, first_day),
            ).fetchall()
        return [UsageDay(row["day"], _counts(row)) for row in rows]

    def usage_totals(self, user_id: int | None = None) -> dict[int, UsageCounts]:
        """Use over all days by user id: `user_id`'s, or (None) everyone's; users with
        none are absent."""
        where, params = ("WHERE user_id = ?", (user_id,)) if user_id is not None else ("", ())
        with self.database.reading() as db:
            rows = db.execute(
                f"SELECT user_id, {_SUMS} FROM usage_days {where} GROUP BY user_id", params
            ).fetchall()
        return {int(row["user_id"]): _counts(row) for row in rows}

    def usage_on(self, day: str) -> dict[int, UsageCounts]:
        """Every user's use on `day`, by user id."""
        with self.database.reading() as db:
            rows = db.execute("SELECT * FROM usage_days WHERE day = ?", (day,)).fetchall()
        return {int(row["user_id"]): _counts(row) for row in rows}
