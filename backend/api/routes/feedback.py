"""Feedback on answers: a thumb up or down, with an optional note, by the user who asked.

Handlers are plain functions (FastAPI runs them in its thread pool): they use the store.
An answer of another user's, a question, a deleted or made-up id: all are "not found".
"""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from backend.api.deps import CurrentUser, RecordId, StoreDep
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.models.conversations import FeedbackIn, FeedbackPublic
from backend.observability.metrics import ANSWER_FEEDBACK

router = APIRouter(prefix="/api/conversations", tags=["conversations"], responses=CLIENT_ERRORS)

_PATH = "/{conversation_id}/messages/{message_id}/feedback"


@router.put(_PATH)
def give_feedback(
    conversation_id: str, message_id: RecordId, body: FeedbackIn, user: CurrentUser, store: StoreDep
) -> FeedbackPublic:
    """Rate one of your answers (again: the new rating and note replace the old)."""
    given = store.set_feedback(user.id, conversation_id, message_id, body.rating, body.note.strip())
    if given is None:
        raise ApiError(404, "Answer not found in this conversation.", code="message_not_found")
    ANSWER_FEEDBACK.labels(model=given.model or "unknown", rating=given.rating).inc()
    return FeedbackPublic.of(given)


@router.delete(_PATH, status_code=status.HTTP_204_NO_CONTENT)
def take_back_feedback(
    conversation_id: str, message_id: RecordId, user: CurrentUser, store: StoreDep
) -> Response:
    """Take back your rating of an answer."""
    if not store.delete_feedback(user.id, conversation_id, message_id):
        raise ApiError(404, "No feedback on this answer.", code="feedback_not_found")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
