"""Conversation and message schemas."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class MessagePublic(BaseModel):
    id: int
    role: str
    content: str
    created_at: float
    metadata: dict[str, Any]


class ConversationPublic(BaseModel):
    id: str
    session_id: str
    title: str
    created_at: float
    updated_at: float
    active_run_id: str | None = None  # a run still going in this conversation


class ConversationDetail(ConversationPublic):
    messages: list[MessagePublic]
