"""Usage per user on the wire: `GET /api/users/me/usage`, `/api/users/{id}/usage` and
`/api/usage` (backend/api/routes/usage.py)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class UsageAmounts(BaseModel):
    turns: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens: int = Field(default=0, description="prompt and completion tokens")
    sandbox_runs: int = 0
    sandbox_cpu_seconds: float = Field(
        default=0.0, description="a run that timed out or was killed counts its wall time"
    )
    sandbox_wall_seconds: float = 0.0


class UsageDayPublic(UsageAmounts):
    day: str = Field(description="YYYY-MM-DD, UTC")


class DailyLimits(BaseModel):
    """The user's limits in force (an admin's, else the server's); 0: unlimited."""

    max_tokens_per_day: int
    max_sandbox_seconds_per_day: int
    max_disk_mb: int


class FeedbackTally(BaseModel):
    up: int = 0
    down: int = 0


FEEDBACK_BY_MODEL = "thumbs up and down on answers, by the model that answered"


class UserUsage(BaseModel):
    user_id: int
    username: str
    today: UsageDayPublic
    days: list[UsageDayPublic] = Field(description="the last `days` UTC days, oldest first")
    total: UsageAmounts = Field(description="every day's, since usage was first recorded")
    disk_bytes: int = Field(description="what the user's workspaces hold now")
    limits: DailyLimits
    resets_at: float = Field(description="the next 00:00 UTC, epoch seconds")
    feedback: dict[str, FeedbackTally] = Field(default_factory=dict, description=FEEDBACK_BY_MODEL)


class UserUsageSummary(BaseModel):
    user_id: int
    username: str
    today: UsageAmounts
    total: UsageAmounts
    limits: DailyLimits


class UsageOverview(BaseModel):
    day: str = Field(description="today, UTC")
    users: list[UserUsageSummary]
    feedback: dict[str, FeedbackTally] = Field(
        default_factory=dict, description=f"everyone's {FEEDBACK_BY_MODEL}"
    )
