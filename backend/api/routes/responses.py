"""`POST /v1/responses`: OpenAI's Responses API over the same chat turns.

A response id carries its conversation's id, so `previous_response_id` continues
that conversation (the stored history is prepended, as for `/v1/chat/completions`
with a `session_id`). Streaming sends the standard typed events.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from backend.api.deps import ChatServiceDep, CurrentUser, StoreDep
from backend.api.disconnect import unless_disconnected
from backend.api.errors import OPENAI_CLIENT_ERRORS, ApiError
from backend.api.routes.openai import check_parameters
from backend.api.sse import SSE_HEADERS, Last, SSEResponse, sse_data, sse_responses
from backend.api.streaming import start_stream
from backend.core.agents.client_tools import ClientTools
from backend.core.chat_service import Turn, TurnRequest
from backend.core.events import AgentEvent
from backend.llm import LLMError
from backend.models.responses import (
    ResponseRequest,
    conversation_of,
    function_call_item,
    message_item,
    new_response_id,
    response_body,
)

router = APIRouter(prefix="/v1", tags=["openai"], responses=OPENAI_CLIENT_ERRORS)


@router.post(
    "/responses",
    responses=sse_responses("A response: JSON, or typed events with `stream: true`."),
)
async def create_response(
    body: ResponseRequest, user: CurrentUser, chat: ChatServiceDep, store: StoreDep, http: Request
) -> Response:
    """A model response, plain JSON or SSE events with `stream: true`."""
    client_tools = body.client_tools
    response_format = body.response_format
    check_parameters(
        body.unsupported_parameter(), body.agent_type, tools=client_tools, text=response_format
    )
    session_id = body.session_id
    if body.previous_response_id is not None:
        conversation_id = conversation_of(body.previous_response_id)
        conversation = store.get_conversation(user.id, conversation_id or "")
        if conversation is None:
            raise ApiError(
                404,
                f"No response '{body.previous_response_id}' to continue.",
                code="response_not_found",
                param="previous_response_id",
            )
        session_id = conversation.session_id
    turn = await chat.open_turn(
        user,
        TurnRequest(
            messages=body.messages(),
            model=body.model,
            session_id=session_id,
            agent_type=body.agent_type,
            options=body.generation_options(),
            tools=ClientTools(*client_tools) if client_tools else None,
        ),
    )
    response_id = new_response_id(turn.conversation.id)
    if not body.stream:
        answer = await unless_disconnected(http, turn.collect())
        return JSONResponse(_finished(turn, response_id, answer, body.previous_response_id))
    events = await start_stream(turn.events)
    return SSEResponse(
        _response_events(turn, events, response_id, body.previous_response_id),
        headers=SSE_HEADERS,
    )


def _output(turn: Turn, message_id: str, text: str) -> list[dict[str, Any]]:
    output = [message_item(message_id, text)] if text or not turn.tool_calls else []
    return output + [function_call_item(call) for call in turn.tool_calls]


def _finished(
    turn: Turn, response_id: str, text: str, previous: str | None, message_id: str = ""
) -> dict[str, Any]:
    output = _output(turn, message_id or f"msg_{uuid.uuid4().hex}", text)
    status = "incomplete" if turn.finish_reason == "length" else "completed"
    return response_body(
        response_id, turn.model, status, output, turn.usage, turn.metadata, previous
    )


class _Events:
    """Typed Responses events, numbered in order."""

    def __init__(self) -> None:
        self.sequence = 0

    def __call__(self, kind: str, **data: Any) -> str:
        payload = {"type": kind, "sequence_number": self.sequence, **data}
        self.sequence += 1
        return sse_data(payload, event=kind)


async def _response_events(
    turn: Turn, events: AsyncGenerator[AgentEvent, None], response_id: str, previous: str | None
) -> AsyncIterator[str]:
    event = _Events()
    message_id = f"msg_{uuid.uuid4().hex}"
    started = response_body(response_id, turn.model, "in_progress", [], None, None, previous)
    yield event("response.created", response=started) + event(
        "response.in_progress", response=started
    )
    text: list[str] = []
    where = {"item_id": message_id, "output_index": 0, "content_index": 0}
    try:
        async with contextlib.aclosing(events):
            async for step in events:
                if step.type == "token":
                    opening = ""
                    if not text:
                        opening = event(
                            "response.output_item.added",
                            output_index=0,
                            item=message_item(message_id, "", "in_progress"),
                        ) + event(
                            "response.content_part.added",
                            **where,
                            part={"type": "output_text", "text": "", "annotations": []},
                        )
                    text.append(step.data["text"])
                    yield opening + event(
                        "response.output_text.delta", **where, delta=step.data["text"], logprobs=[]
                    )
                elif step.type == "final":
                    answer = "".join(text)
                    final = _finished(turn, response_id, answer, previous, message_id)
                    closing = _closing(event, turn, answer, message_id, where)
                    yield Last(closing + event("response.completed", response=final))
    except LLMError as exc:
        error = {"code": exc.code, "message": exc.message}
        failed = response_body(response_id, turn.model, "failed", [], None, None, previous, error)
        yield Last(
            event("error", code=exc.code, message=exc.message, param=None)
            + event("response.failed", response=failed)
        )


def _closing(
    event: _Events, turn: Turn, answer: str, message_id: str, where: dict[str, Any]
) -> str:
    """The events that close the output items: the text's, then each tool call's."""
    closing = []
    if answer:
        part = {"type": "output_text", "text": answer, "annotations": []}
        closing += [
            event("response.output_text.done", **where, text=answer, logprobs=[]),
            event("response.content_part.done", **where, part=part),
            event(
                "response.output_item.done", output_index=0, item=message_item(message_id, answer)
            ),
        ]
    for index, call in enumerate(turn.tool_calls, start=1 if answer else 0):
        item = function_call_item(call)
        closing += [
            event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress"},
            ),
            event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            ),
            event("response.output_item.done", output_index=index, item=item),
        ]
    return "".join(closing)
