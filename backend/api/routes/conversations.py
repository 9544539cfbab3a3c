"""The signed-in user's stored conversations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from backend.api.deps import CurrentUser, PurgeDep, RunsDep, StoreDep
from backend.api.encoders.links import linked_metadata
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.core.runs import RunRegistry
from backend.models.conversations import (
    BranchPublic,
    ConversationDetail,
    ConversationPublic,
    FeedbackPublic,
    MessagePublic,
)
from backend.storage import Conversation
from backend.storage.message_tree import MessageTree

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
    conversation_id: str,
    user: CurrentUser,
    store: StoreDep,
    runs: RunsDep,
    leaf: Annotated[int | None, Query(ge=1, description="Show the branch of this message.")] = None,
) -> ConversationDetail:
    """One conversation: the branch through `leaf` (default: its latest message), and a
    list of its branches."""
    conversation = store.get_conversation(user.id, conversation_id)
    if conversation is None:
        raise ApiError(404, "Conversation not found.", code="conversation_not_found")
    tree = MessageTree(store.list_messages(conversation.id))
    if leaf is not None and leaf not in tree:
        raise ApiError(404, "Message not found in this conversation.", code="message_not_found")
    end = tree.latest_leaf(leaf) if leaf is not None else tree.latest
    thumbs = store.feedback_in(user.id, conversation.id)
    messages = [
        MessagePublic(
            id=m.id,
            role=m.role,
            content=m.content,
            created_at=m.created_at,
            metadata=linked_metadata(m.metadata, conversation.session_id),
            parent_id=m.parent_id,
            siblings=tree.siblings(m.id),
            feedback=FeedbackPublic.of(thumbs[m.id]) if m.id in thumbs else None,
        )
        for m in tree.path(end)
    ]
    return ConversationDetail(
        **_public(conversation, runs).model_dump(),
        messages=messages,
        leaf_id=end,
        branches=[_branch(tree, leaf_id) for leaf_id in tree.leaves()],
    )


def _branch(tree: MessageTree, leaf_id: int) -> BranchPublic:
    path = tree.path(leaf_id)
    question = next((m.content for m in reversed(path) if m.role == "user"), "")
    preview = " ".join(question.split())
    return BranchPublic(
        leaf_id=leaf_id,
        created_at=tree.messages[leaf_id].created_at,
        preview=preview if len(preview) <= 80 else preview[:79] + "…",
    )


@router.delete("/{conversation_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_conversation(conversation_id: str, user: CurrentUser, purge: PurgeDep) -> Response:
    """Delete a conversation and all of its session: its run, sandbox, files, checkpoints,
    passages and unfinished uploads. The same session id used again starts empty."""
    if not await purge.session(user.id, conversation_id):
        raise ApiError(404, "Conversation not found.", code="conversation_not_found")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
