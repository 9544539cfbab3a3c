"""`/api/chat`: the server keeps the history; the client sends one message."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from backend.core.router import AgentType
from backend.models.common import SessionId, Text


class ChatRequest(BaseModel):
    message: Text = Field(min_length=1, max_length=200_000)
    session_id: SessionId | None = None
    agent_type: AgentType = "auto"
    model: Text = ""
    stream: bool = False


class Citation(BaseModel):
    """Where one number of the answer came from; `start`/`end` index the answer (code points).

    `computed`: a run printed it (`run_id`, its `code`, the `output_line` and its 1-based
    `line`). `question`: the user wrote it. `document`: a passage holds it (`source`: "[n] file").
    """

    text: str
    start: int
    end: int
    kind: Literal["computed", "question", "document"]
    run_id: str | None = None
    code: str | None = None
    output_line: str | None = None
    line: int | None = None
    source: str | None = None


class ChatResponse(BaseModel):
    answer: str
    model: str
    session_id: str
    conversation_id: str
    agent_type: str
    metadata: dict[str, Any]
    citations: list[Citation] = []
