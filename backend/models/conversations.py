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


class ConversationDetail(ConversationPublic):
    messages: list[MessagePublic]
