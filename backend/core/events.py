"""What agents emit while they work; the API turns these into SSE or JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

EventType = Literal["router", "token", "usage", "finish", "final", "error", "done"]


@dataclass(frozen=True)
class AgentEvent:
    type: EventType
    data: dict[str, Any] = field(default_factory=dict)
