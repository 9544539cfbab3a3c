"""Conversation and message schemas."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.storage.feedback import Feedback


class FeedbackIn(BaseModel):
    """A thumb up or down on an answer, with an optional note (what was wrong, or right)."""

    model_config = ConfigDict(extra="forbid")

    rating: Literal["up", "down"]
    note: str = Field(default="", max_length=2_000)


class FeedbackPublic(BaseModel):
    message_id: int
    rating: Literal["up", "down"]
    note: str
    model: str  # the model that gave the answer
    updated_at: float

    @classmethod
    def of(cls, given: Feedback) -> FeedbackPublic:
        return cls(
            message_id=given.message_id,
            rating=given.rating,
            note=given.note,
            model=given.model,
            updated_at=given.updated_at,
        )


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
    feedback: FeedbackPublic | None = None  # the user's thumb on this answer, if given


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
