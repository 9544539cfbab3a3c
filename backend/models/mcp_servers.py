"""Schemas of the MCP servers an admin registers for the agents.

Secrets go in (`secrets`: an HTTP server's headers, a stdio server's environment)
and never come out: `McpServerPublic` names them only.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from backend.models.common import Text

# The prefix of its tools' names (`<name>__<tool>`): no "__" of its own.
ServerName = Annotated[str, StringConstraints(pattern=r"^[a-z](?:_?[a-z0-9])*$", max_length=32)]
SecretName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")]
ToolName = Annotated[Text, StringConstraints(min_length=1, max_length=128)]
Argument = Annotated[Text, StringConstraints(max_length=4096)]
Secrets = dict[SecretName, Annotated[Text, StringConstraints(max_length=8192)]]


class _Fields(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: Annotated[Text, StringConstraints(max_length=2048)] | None = Field(
        default=None, description="http: the server's Streamable HTTP endpoint"
    )
    command: list[Argument] | None = Field(
        default=None, max_length=64, description="stdio: the program and its arguments"
    )
    secrets: Secrets | None = Field(
        default=None,
        max_length=32,
        description="http: headers; stdio: environment variables. Stored sealed, never shown "
        "back. In a change, each one given replaces the one of its name, an empty value "
        "removes it, and those not named are kept",
    )
    allowed_tools: list[ToolName] | None = Field(
        default=None, max_length=256, description="the tools the agents are offered"
    )
    user_ids: list[int] | None = Field(
        default=None, max_length=10_000, description="who may use it; null: every user"
    )
    enabled: bool | None = None


class McpServerCreate(_Fields):
    name: ServerName
    transport: Literal["http", "stdio"]

    @model_validator(mode="after")
    def _reachable(self) -> McpServerCreate:
        if self.transport == "http" and not (self.url or "").startswith(("http://", "https://")):
            raise ValueError("an http server needs a url that starts with http:// or https://")
        if self.transport == "stdio" and not self.command:
            raise ValueError("a stdio server needs a command (the program and its arguments)")
        return self


class McpServerUpdate(_Fields):
    """What an admin changes; a field left out stays as it is (`user_ids` too: send
    `"everyone": true` to open it to every user)."""

    everyone: bool | None = Field(default=None, description="true: every user may use it")


class McpServerPublic(BaseModel):
    id: int
    name: str
    transport: Literal["http", "stdio"]
    url: str
    command: list[str]
    secret_names: list[str]
    allowed_tools: list[str]
    user_ids: list[int] | None
    enabled: bool
    created_at: float


class McpToolPublic(BaseModel):
    name: str
    agent_name: str  # what the agents call it
    description: str
    input_schema: dict[str, object]
    allowed: bool


class McpServerTools(BaseModel):
    tools: list[McpToolPublic]
    error: str | None = Field(
        default=None, description="why the server could not be reached (`tools` is then empty)"
    )
