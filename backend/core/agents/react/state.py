"""The ReAct graph's state: the question, the steps so far, and how it ended."""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict


class Step(TypedDict):
    thought: str
    action: str  # the tool's canonical name
    action_input: str
    observation: str
    ok: bool  # whether the tool succeeded (python_coder: whether its code ran)
    data: dict[str, Any]  # what the tool returned besides the text (code, files, …)


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
