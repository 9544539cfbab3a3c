"""The smart router: decides which agent answers a message, and records why."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AgentType = Literal["auto", "react", "plan_execute", "chat"]


@dataclass(frozen=True)
class RouteDecision:
    agent_type: Literal["react", "plan_execute", "chat"]
    reason: str


def route_message(requested: AgentType, message: str) -> RouteDecision:
    """Pick the agent for `message`. Only plain chat exists so far."""
    if requested == "chat":
        return RouteDecision("chat", "requested explicitly")
    return RouteDecision("chat", f"'{requested}' requested; the code agents are not built yet")
