"""`/api/chat`: the server keeps the history; the UI streams typed events."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from langchain_core.messages import HumanMessage

from backend.api.deps import ChatServiceDep, CurrentUser
from backend.api.disconnect import unless_disconnected
from backend.api.encoders.chat import chat_response, typed_sse
from backend.api.errors import CLIENT_ERRORS
from backend.api.sse import SSE_HEADERS, SSEResponse, sse_responses
from backend.api.streaming import start_stream
from backend.core.turn import TurnRequest
from backend.models.chat import ChatRequest, ChatResponse

router = APIRouter(prefix="/api", tags=["chat"], responses=CLIENT_ERRORS)


@router.post(
    "/chat",
    response_model=ChatResponse,
    responses=sse_responses("The answer: JSON, or typed events with `stream: true`."),
)
async def create_chat_message(
    body: ChatRequest, user: CurrentUser, chat: ChatServiceDep, http: Request
) -> Response | ChatResponse:
    """Send one message; the answer continues the session's stored conversation."""
    request = TurnRequest(
        messages=[HumanMessage(body.message)],
        model=body.model,
        session_id=body.session_id,
        agent_type=body.agent_type,
        parent_message_id=body.parent_message_id,
    )
    turn = await chat.open_turn(user, request)
    if body.stream:
        events = await start_stream(turn.events)
        return SSEResponse(
            typed_sse(events, turn.plan.conversation.session_id), headers=SSE_HEADERS, source=events
        )
    return chat_response(await unless_disconnected(http, turn.collect()))
