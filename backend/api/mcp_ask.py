"""The MCP `ask` tool: one whole agent turn, as the chat UI's, for an MCP host.

The turn is the same as `/api/chat`'s (the router picks the agent unless the host names
one; the answer is stored in the session's conversation). Its steps go out as MCP
progress notifications, one line each ("Running python_coder", "Step 2: ..."), and the
answer comes back as text, with its citations (where each number came from) and the
turn's summary as structured content.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent

from backend.core.events import (
    Code,
    ContextFitted,
    Execution,
    Failed,
    Final,
    Plan,
    Routed,
    StepStart,
    ToolCall,
)
from backend.core.router import AgentType
from backend.core.services import Services
from backend.core.turn import TurnRequest
from backend.storage import User


def progress_line(event: object) -> str | None:
    """One line for a step of the turn worth telling the host; None for the rest."""
    if isinstance(event, Routed):
        return f"The {event.agent_type} agent answers: {event.reason}"
    if isinstance(event, Plan):
        return f"{'Revised plan' if event.revised else 'Plan'}: {len(event.steps)} steps"
    if isinstance(event, StepStart):
        return f"Step {event.index}: {event.goal}"
    if isinstance(event, ToolCall):
        return f"Calling {event.tool}"
    if isinstance(event, Code):
        return f"Running code (attempt {event.attempt})"
    if isinstance(event, Execution):
        return "The code ran" if event.ok else f"The code failed: {(event.error or '')[:200]}"
    if isinstance(event, ContextFitted):
        return event.message
    return None


async def ask(
    services: Services, user: User, session_id: str, question: str, agent: AgentType, ctx: Context
) -> CallToolResult:
    """Run the turn to its end, telling the host each step; its answer and citations."""
    request = TurnRequest(
        messages=[HumanMessage(question)], session_id=session_id, agent_type=agent
    )
    turn = await services.chat.open_turn(user, request)  # a LimitReached: mcp_errors.py
    final: Final | None = None
    steps = 0
    async for event in turn.events:
        if isinstance(event, Final):
            final = event
        elif isinstance(event, Failed):
            raise ToolError(event.message)
        elif (line := progress_line(event)) is not None:
            steps += 1
            await ctx.report_progress(steps, message=line)
    if final is None:
        raise ToolError("The turn ended without an answer; see the server log.")
    structured: dict[str, Any] = {
        "answer": final.text,
        "citations": final.citations_payload(),
        **final.summary.model_dump(mode="json"),
    }
    return CallToolResult(
        content=[TextContent(type="text", text=final.text)], structured_content=structured
    )
