"""The Plan-and-Execute graph's state and the planner's structured replies."""

from __future__ import annotations

from typing import Annotated, Literal, TypedDict

from pydantic import BaseModel, Field

from backend.core.agents.tools import ToolData

MAX_STEPS = 6


class PlanStep(BaseModel):
    goal: str
    tool: str = "python_coder"
    success_criterion: str = ""


class Plan(BaseModel):
    steps: list[PlanStep] = Field(min_length=1, max_length=MAX_STEPS)


class Replan(BaseModel):
    """After a step: go on with the plan, replace the remaining steps, or finish."""

    decision: Literal["continue", "revise", "finish"]
    steps: list[PlanStep] = Field(default_factory=list, max_length=MAX_STEPS)
    reason: str = ""


class StepResult(TypedDict):
    goal: str
    tool: str
    observation: str
    ok: bool
    data: ToolData


def results_of_turn(left: list[StepResult], right: list[StepResult] | None) -> list[StepResult]:
    """Append a result; None (sent with each new question) starts the turn's list afresh."""
    return [] if right is None else left + right


class PlanState(TypedDict, total=False):
    question: str
    history: list[tuple[str, str]]
    plan: list[dict[str, str]]  # the steps still to run, first one next
    results: Annotated[list[StepResult], results_of_turn]
    replans: int
    final_answer: str | None
