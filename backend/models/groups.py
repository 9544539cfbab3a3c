"""Group schemas: a group's limits, the models and MCP servers its members may use, and
its members."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.models.auth import Limits
from backend.models.common import Text
from backend.storage.groups import GROUP_NAME_PATTERN

GroupName = Text
ModelName = Text


class GroupCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: GroupName = Field(pattern=GROUP_NAME_PATTERN, description="as a group claim names it")
    description: Text = Field(default="", max_length=500)
    limits: Limits = Field(
        default_factory=Limits,
        description="null: this group has no say (a member's limit is the most generous of "
        "their groups', unless set on the user)",
    )
    models: list[ModelName] | None = Field(
        default=None,
        max_length=500,
        description='the models members may use ("*": every model); null: no say',
    )
    mcp_server_ids: list[int] | None = Field(
        default=None, max_length=500, description="the MCP servers members may use; null: no say"
    )


class GroupUpdate(BaseModel):
    """What an admin changes; a field left out stays as it is."""

    model_config = ConfigDict(extra="forbid")

    name: GroupName | None = Field(default=None, pattern=GROUP_NAME_PATTERN)
    description: Text | None = Field(default=None, max_length=500)
    limits: Limits | None = Field(default=None, description="replaces all the limits")
    models: list[ModelName] | None = Field(default=None, max_length=500)
    mcp_server_ids: list[int] | None = Field(default=None, max_length=500)


class GroupMember(BaseModel):
    user_id: int
    username: str
    origin: Literal["admin", "claim"] = Field(
        description="admin: added by an admin; claim: the identity provider names the group"
    )


class GroupPublic(BaseModel):
    id: int
    name: str
    description: str
    limits: Limits
    models: list[str] | None
    mcp_server_ids: list[int] | None
    created_at: float
    members: list[GroupMember]


class GroupMemberAdd(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: int = Field(ge=1, le=2**63 - 1)
