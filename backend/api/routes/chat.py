"""`/api/chat`: the server keeps the history; the UI streams typed events."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import Response
from langchain_core.messages import HumanMessage

from backend.api.deps import ChatServiceDep, CurrentUser
from backend.api.disconnect import unless_disconnected
from backend.api.errors import CLIENT_ERRORS
from backend.api.sse import SSE_HEADERS, Last, SSEResponse, sse_data, sse_responses
from backend.api.streaming import start_stream
from backend.core.chat_service import Turn, TurnRequest
from backend.core.events import AgentEvent
from backend.llm import LLMError
from backend.models.chat import ChatRequest, ChatResponse, Citation

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
    )
    turn = await chat.open_turn(user, request)
    if body.stream:
        events = await start_stream(turn.events)
        return SSEResponse(_typed_events(turn, events), headers=SSE_HEADERS)
    answer = await unless_disconnected(http, turn.collect())
    return ChatResponse(
        answer=answer,
        model=turn.model,
        session_id=turn.conversation.session_id,
        conversation_id=turn.conversation.id,
        agent_type=turn.decision.agent_type,
        metadata=turn.metadata,
        citations=[Citation.model_validate(c) for c in turn.citations],
    )


async def _typed_events(turn: Turn, events: AsyncGenerator[AgentEvent, None]) -> AsyncIterator[str]:
    """`event: <type>` SSE frames whose JSON data also carries `type`."""
    done = sse_data({"type": "done"}, event="done")
    try:
        async with contextlib.aclosing(events):
            async for event in events:
                payload = turn.public_event(event)
                if event.type == "final":
                    yield Last(sse_data(payload, event="final") + done)
                elif payload is not None:
                    yield sse_data(payload, event=event.type)
    except LLMError as exc:
        error = {"type": "error", "message": exc.message, "code": exc.code}
        yield Last(sse_data(error, event="error") + done)
