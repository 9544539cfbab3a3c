"""The signed-in user's stored conversations."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from backend.api.deps import CurrentUser, PurgeDep, RunsDep, StoreDep
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.core.runs import RunRegistry
from backend.models.conversations import ConversationDetail, ConversationPublic, MessagePublic
from backend.storage import Conversation

router = APIRouter(prefix="/api/conversations", tags=["conversations"], responses=CLIENT_ERRORS)


def _public(conversation: Conversation, runs: RunRegistry) -> ConversationPublic:
    active = runs.active_for(conversation.session_key)
    return ConversationPublic(
        active_run_id=active.id if active is not None else None,
        id=conversation.id,
        session_id=conversation.session_id,
        title=conversation.title,
        created_at=conversation.created_at,
        updated_at=conversation.updated_at,
    )


@router.get("")
async def read_conversations(
    user: CurrentUser, store: StoreDep, runs: RunsDep
) -> list[ConversationPublic]:
    """List the user's conversations, most recent first."""
    return [_public(c, runs) for c in store.list_conversations(user.id)]


@router.get("/{conversation_id}")
async def read_conversation(
    conversation_id: str, user: CurrentUser, store: StoreDep, runs: RunsDep
) -> ConversationDetail:
    """One conversation with its messages."""
    conversation = store.get_conversation(user.id, conversation_id)
    if conversation is None:
        raise ApiError(404, "Conversation not found.", code="conversation_not_found")
    messages = [
        MessagePublic(
            id=m.id, role=m.role, content=m.content, created_at=m.created_at, metadata=m.metadata
        )
        for m in store.list_messages(conversation.id)
    ]
    return ConversationDetail(**_public(conversation, runs).model_dump(), messages=messages)


@router.delete("/{conversation_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_conversation(conversation_id: str, user: CurrentUser, purge: PurgeDep) -> Response:
    """Delete a conversation and all of its session: its run, sandbox, files, checkpoints,
    passages and unfinished uploads. The same session id used again starts empty."""
    if not await purge.session(user.id, conversation_id):
        raise ApiError(404, "Conversation not found.", code="conversation_not_found")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
