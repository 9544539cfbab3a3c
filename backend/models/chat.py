"""`/api/chat`: the server keeps the history; the client sends one message."""

from __future__ import annotations

from pydantic import BaseModel, Field

from backend.core.events import Chart, Citation, Table, TurnSummary
from backend.core.router import AgentType
from backend.models.common import SessionId, Text


class ChatRequest(BaseModel):
    message: Text = Field(min_length=1, max_length=200_000)
    session_id: SessionId | None = None
    agent_type: AgentType = "auto"
    model: Text = ""
    parent_message_id: int | None = Field(
        default=None,
        ge=0,
        description="The message this one follows (editing a message: its parent;"
        " 0: a new first message). Naming your own message regenerates its answer"
        " (send its text again). Omitted: after the latest message.",
    )
    stream: bool = False


class TableShown(Table):
    url: str  # serves its summary, its pages (sorted, filtered) and downloads


class ChartShown(Chart):
    spec_url: str
    png_url: str


class ChatResponse(BaseModel):
    answer: str
    model: str
    session_id: str
    conversation_id: str
    agent_type: str
    metadata: TurnSummary
    citations: list[Citation] = []
    tables: list[TableShown] = []  # the tables its runs showed (also sent as `table` events)
    charts: list[ChartShown] = []  # the charts its runs showed, with their PNGs (`chart` events)
