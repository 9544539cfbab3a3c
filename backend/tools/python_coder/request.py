"""What a caller asks python_coder to do."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from backend.storage.sessions import SessionKey

# "write": the answer is the tool's result (the HTTP tool); "final": it is the turn's answer,
# shown as it is written (an agent's one tool call that answers the question); "none": the
# agent writes the answer from the output itself, later (a step of a plan).
AnswerMode = Literal["write", "final", "none"]


@dataclass
class CoderRequest:
    session_id: SessionKey
    query: str
    files: list[str] | None = None  # workspace paths to use; None: choose from uploads
    file_paths: dict[str, str] | None = None  # workspace path -> variable name
    history: list[tuple[str, str]] = field(default_factory=list)  # (role, content), oldest first
    plan: str = ""  # the plan context, when called from Plan-and-Execute
    react: list[str] = field(default_factory=list)  # earlier failed attempts and their errors
    question: str = ""  # the user's message, when an agent asks for `query` to answer it
    answer: AnswerMode = "write"
    partial: bool = False  # with "final": the model may say the run answered only part of it
    head: str | None = None  # the METADATA the turn's head (`TurnLLM.head`) already carries
