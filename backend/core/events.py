"""What agents emit while they work; the API turns these into SSE or JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

EventType = Literal[
    "router",
    "accepted",
    "plan",
    "step_start",
    "tool_call",
    "code",
    "execution",
    "plot",
    "token",
    "tool_calls",
    "usage",
    "finish",
    "final",
    "error",
    "done",
]
STEP_EVENTS = frozenset({"plan", "step_start", "tool_call", "code", "execution", "plot"})


@dataclass(frozen=True)
class AgentEvent:
    type: EventType
    data: dict[str, Any] = field(default_factory=dict)
