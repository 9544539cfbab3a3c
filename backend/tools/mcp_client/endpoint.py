"""What a link needs to reach one MCP server, and what it gives back."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass(frozen=True)
class Endpoint:
    """A registered server with its secrets unsealed: never logged, never sent to a client."""

    name: str
    transport: Literal["http", "stdio"]
    url: str = ""
    command: tuple[str, ...] = ()
    secrets: dict[str, str] = field(default_factory=dict)  # http: headers; stdio: environment

    def fingerprint(self) -> str:
        """Changes whenever anything that makes the connection changes (an admin's edit)."""
        text = json.dumps(
            [self.name, self.transport, self.url, self.command, sorted(self.secrets.items())]
        )
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class ToolInfo:
    name: str  # as the server names it
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ToolOutcome:
    """A call's result as text (images and other media are named, not kept)."""

    text: str
    ok: bool
    cut: bool = False  # the result was longer than the limit, and was cut there
