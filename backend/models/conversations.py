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
    parent_id: int | None = None  # the message it follows; None for the first
    # The messages with the same parent, itself included, oldest first: more than one
    # where the user edited a message or regenerated an answer ("< 2 / 3 >").
    siblings: list[int] = []


class BranchPublic(BaseModel):
    leaf_id: int  # the branch's last message: `?leaf=` shows it
    created_at: float  # when that message was written
    preview: str  # its last question, shortened


class ConversationPublic(BaseModel):
    id: str
    session_id: str
    title: str
    created_at: float
    updated_at: float
    active_run_id: str | None = None  # a run still going in this conversation


class ConversationDetail(ConversationPublic):
    messages: list[MessagePublic]  # one branch: from the first message to `leaf_id`
    leaf_id: int | None = None
    branches: list[BranchPublic] = []  # every branch, oldest first
