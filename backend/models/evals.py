"""Evaluations on the wire: sets of questions with known answers, runs over a model, and
each question's result."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from backend.core.router import AgentType
from backend.models.common import Text

RunStatus = Literal["queued", "running", "completed", "cancelled", "failed", "interrupted"]


class EvalExpectedPublic(BaseModel):
    name: str
    value: str
    tolerance: float


class EvalQuestionPublic(BaseModel):
    id: str
    question: str
    files: list[str]
    expected: list[EvalExpectedPublic]
    kind: str
    constraints: str
    format: str


class EvalSetPublic(BaseModel):
    id: str
    name: str
    source: Literal["starter", "dabench"]
    question_count: int
    kinds: dict[str, int] = Field(description="How many questions of each type (or level).")
    created_at: float


class EvalSetDetail(EvalSetPublic):
    questions: list[EvalQuestionPublic]


class EvalRunCreate(BaseModel):
    set_id: Text = Field(max_length=64)
    model: Text = Field(default="", max_length=200, description="Default: the server's model.")
    agent_type: AgentType = "auto"


class EvalScore(BaseModel):
    right: int
    answered: int = Field(description="Questions asked so far (all of them once it ends).")
    accuracy: float
    low: float = Field(description="The 95% Wilson interval's low end.")
    high: float = Field(description="The 95% Wilson interval's high end.")


class EvalResultPublic(BaseModel):
    question_id: str
    kind: str
    question: str
    correct: bool
    expected: dict[str, str]
    answer: str
    extracted: dict[str, str] = Field(description="The answer's `@name[value]` pairs.")
    values: dict[str, bool] = Field(description="Each expected value: right or not.")
    code: list[str]
    llm_calls: int
    tokens: int
    seconds: float
    error: str | None
    stopped: bool = Field(
        description="The run was stopped before this question was answered: not scored."
    )
    session_id: str
    conversation_id: str | None


class EvalKindScore(BaseModel):
    kind: str
    right: int
    answered: int
    llm_calls: int
    tokens: int
    seconds: float


class EvalRunPublic(BaseModel):
    id: str
    set_id: str
    set_name: str
    model: str
    agent_type: str
    status: RunStatus
    total: int
    done: int
    current: str | None = Field(description="The question being asked, while it runs.")
    error: str
    created_at: float
    finished_at: float | None
    score: EvalScore


class EvalRunDetail(EvalRunPublic):
    results: list[EvalResultPublic]
    by_kind: list[EvalKindScore]


class EvalPair(BaseModel):
    question_id: str
    kind: str
    question: str
    first: EvalResultPublic | None
    second: EvalResultPublic | None


class EvalComparison(BaseModel):
    first: EvalRunPublic
    second: EvalRunPublic
    questions: list[EvalPair]
