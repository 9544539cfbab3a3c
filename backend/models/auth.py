"""Login, user and API key schemas.

Nothing here carries a password hash or a key hash: a new API key's secret is in
`ApiKeyCreated` once, and never again.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.models.common import Text

Password = Text  # checked by length only: a passphrase of any characters is welcome


class LoginRequest(BaseModel):
    username: Text = Field(min_length=1, max_length=150)
    password: Text = Field(min_length=1, max_length=1024)


class Token(BaseModel):
    access_token: str
    token_type: Literal["bearer"] = "bearer"


class PasswordChange(BaseModel):
    current_password: Password = Field(min_length=1, max_length=1024)
    new_password: Password = Field(min_length=8, max_length=1024)
    sign_out_everywhere: bool = Field(
        default=True,
        description="Also end every personal API key of yours. Your other sessions end "
        "either way (their tokens name the old password); false keeps your API keys.",
    )


class PasswordReset(BaseModel):
    password: Password = Field(min_length=8, max_length=1024)


class Limits(BaseModel):
    """A user's limits; null means the server's default setting."""

    model_config = ConfigDict(extra="forbid")

    max_sandboxes: int | None = Field(default=None, ge=1, le=10_000, description="warm sandboxes")
    max_runs: int | None = Field(default=None, ge=1, le=10_000, description="concurrent runs")
    max_disk_mb: int | None = Field(
        default=None, ge=1, le=1_000_000_000, description="workspace disk, in MB"
    )
    max_tokens_per_day: int | None = Field(
        default=None, ge=0, le=10**15, description="model tokens per UTC day; 0: unlimited"
    )
    max_sandbox_seconds_per_day: int | None = Field(
        default=None, ge=0, le=10**9, description="sandbox CPU seconds per UTC day; 0: unlimited"
    )


class UserCreate(BaseModel):
    username: str = Field(pattern=r"^[A-Za-z0-9_.@-]{1,150}$")
    password: Password = Field(min_length=8, max_length=1024)
    is_admin: bool = False


class UserUpdate(BaseModel):
    """What an admin changes; a field left out stays as it is."""

    model_config = ConfigDict(extra="forbid")

    disabled: bool | None = None
    limits: Limits | None = Field(default=None, description="replaces all the limits")


class UserGroup(BaseModel):
    id: int
    name: str
    origin: Literal["admin", "claim"] = Field(
        description="admin: added by an admin; claim: the identity provider names the group"
    )


class UserPublic(BaseModel):
    id: int
    username: str
    is_admin: bool
    disabled: bool
    created_at: float
    limits: Limits
    email: str = Field(default="", description="as single sign-on last gave it")
    display_name: str = Field(default="", description="as single sign-on last gave it")
    groups: list[UserGroup] = Field(default_factory=list)


class ApiKeyCreate(BaseModel):
    name: Text = Field(min_length=1, max_length=100)


class ApiKeyPublic(BaseModel):
    id: int
    name: str
    created_at: float
    last_used_at: float | None


class ApiKeyCreated(ApiKeyPublic):
    key: str = Field(description="The key itself: shown only this once")
