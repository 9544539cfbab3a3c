"""The ReAct graph's state: the question, the steps so far, and how it ended."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

from backend.core.agents.tools import ToolData


class Step(TypedDict):
    thought: str
    action: str  # the tool's canonical name
    action_input: str
    observation: str
    ok: bool  # whether the tool succeeded (python_coder: whether its code ran)
    data: ToolData  # what the tool returned besides the text (code, files, …)


def react_context(steps: list[Step]) -> list[str]:
    """Earlier failed python_coder attempts and their errors, and what other tools (MCP
    servers') found, for the next generation."""
    earlier = []
    for step in steps:
        if step["ok"] and step["data"].get("mcp"):
            earlier.append(
                f"Tool {step['action']}({step['action_input'][:300]}) found:\n"
                f"{step['observation'][:1500]}"  # a cut result keeps its start
            )
        elif step["action"] == "python_coder" and not step["ok"]:
            code = str(step["data"].get("code", "")).strip()
            earlier.append(
                f"Task: {step['action_input']}\nCode:\n{code[-1500:]}\n"
                f"Error: {str(step['data'].get('error', step['observation']))[-800:]}"
            )
    return earlier


def steps_of_turn(left: list[Step], right: list[Step] | None) -> list[Step]:
    """Append a step; None (sent with each new question) starts the turn's list afresh."""
    return [] if right is None else left + right


class ReactState(TypedDict, total=False):
    question: str
    history: list[tuple[str, str]]  # earlier (role, content) messages of the conversation
    steps: Annotated[list[Step], steps_of_turn]
    earlier: Annotated[list[str], operator.add]  # one line per finished turn: the memory
    pending: dict[str, str] | None  # the parsed action waiting to run: thought, tool, input
    final_answer: str | None
    stop_reason: str  # "answered", "max_iterations", "repeated_action"
