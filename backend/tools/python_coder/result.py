"""What a python_coder run returns: the answer and its full audit trail."""

from __future__ import annotations

import secrets
from typing import Any, Literal

from pydantic import BaseModel, Field

from backend.tools.sandbox.table_result import TablePreview


def new_run_id() -> str:
    """A run's id: what a citation of its output names, unique within a server's life and beyond."""
    return "run_" + secrets.token_hex(6)


class SelectedFile(BaseModel):
    name: str
    reason: str
    variable: str | None = None


class Review(BaseModel):
    """The LLM reviewer's verdict; the JSON schema that constrains its reply."""

    answers_question: bool
    problems: list[str] = Field(default_factory=list)


class VerificationRound(BaseModel):
    iteration: int
    static_problems: list[str] = Field(default_factory=list)
    review: Review | None = None
    approved: bool | None  # None: the reviewer's reply could not be read


class Modification(BaseModel):
    """One change to the code, and why it was made."""

    stage: Literal["static", "review", "fix"]
    iteration: int
    reason: str
    code: str


class ExecutionAttempt(BaseModel):
    attempt: int
    run_id: str = Field(default_factory=new_run_id)
    code: str
    success: bool
    stdout: str = ""
    error: str | None = None
    files: list[str] = Field(default_factory=list)
    tables: list[TablePreview] = Field(default_factory=list)  # what a successful run showed
    execution_time: float = 0.0


class CoderResult(BaseModel):
    success: bool
    code: str = ""
    output: str = ""
    error: str | None = None
    execution_time: float = 0.0
    iterations: int = 0
    modifications: list[Modification] = Field(default_factory=list)
    verification_history: list[VerificationRound] = Field(default_factory=list)
    execution_history: list[ExecutionAttempt] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    answer: str = ""
    selected_files: list[SelectedFile] = Field(default_factory=list)
    review_skipped: str | None = None
    analysis_spec: dict[str, Any] | None = None  # spec-first generation (small models)
    variables: list[dict[str, Any]] = Field(default_factory=list)
    notepad_entry: dict[str, Any] | None = None
    warnings: list[str] = Field(default_factory=list)
    llm_calls: int = 0
    tokens: int = 0
    run_id: str | None = None  # the successful attempt's, which the citations name
    citations: list[dict[str, Any]] = Field(default_factory=list)  # provenance.cite
    final: bool = False  # `answer` was written, and shown, as the turn's answer
