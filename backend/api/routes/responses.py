"""`POST /v1/responses`: OpenAI's Responses API over the same chat turns.

A response id carries its conversation's id, so `previous_response_id` continues
that conversation (the stored history is prepended, as for `/v1/chat/completions`
with a `session_id`). Any earlier response may be continued: the new turn follows
that response's answer, a branch with that branch's history and data. Streaming
sends the standard typed events.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from backend.api.bodies import UploadQuota
from backend.api.code_interpreter import (
    check_tools,
    interpreter_agent,
    interpreter_container,
    interpreter_output,
)
from backend.api.deps import ChatServiceDep, ContainersDep, CurrentUser, LimitsDep, StoreDep
from backend.api.disconnect import unless_disconnected
from backend.api.encoders.responses import finished, response_events
from backend.api.errors import OPENAI_CLIENT_ERRORS, ApiError
from backend.api.routes.openai import check_parameters
from backend.api.sse import SSE_HEADERS, SSEResponse, sse_responses
from backend.api.streaming import start_stream
from backend.core.agents.client_tools import ClientTools
from backend.core.turn import TurnRequest
from backend.models.responses import (
    ResponseRequest,
    conversation_of,
    new_response_id,
)
from backend.storage.sessions import client_id

router = APIRouter(prefix="/v1", tags=["openai"], responses=OPENAI_CLIENT_ERRORS)


@router.post(
    "/responses",
    responses=sse_responses("A response: JSON, or typed events with `stream: true`."),
)
async def create_response(
    body: ResponseRequest,
    user: CurrentUser,
    chat: ChatServiceDep,
    store: StoreDep,
    containers: ContainersDep,
    limits: LimitsDep,
    http: Request,
) -> Response:
    """A model response, plain JSON or SSE events with `stream: true`."""
    client_tools = body.client_tools
    response_format = body.response_format
    check_tools(body)
    interpreter = body.code_interpreter
    agent_type = body.agent_type
    if interpreter is not None:
        agent_type = interpreter_agent(body)
    check_parameters(
        body.unsupported_parameter(), agent_type, tools=client_tools, text=response_format
    )
    session_id = body.session_id
    parent_message_id = None
    conversation = None
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
        # An earlier response, not only the latest, continues: its answer is the parent.
        parent_message_id = next(
            (
                m.id
                for m in store.list_messages(conversation.id)
                if m.metadata.get("response_id") == body.previous_response_id
            ),
            None,  # a response from before branches: after the latest message
        )
    container = output = None
    if interpreter is not None:
        continued = conversation.session_key if conversation else None
        container = await interpreter_container(
            containers, UploadQuota(limits, user), interpreter, continued
        )
        session_id = client_id(container.session_key)
        output = interpreter_output(container.id, str(http.base_url), body)
    turn = await chat.open_turn(
        user,
        TurnRequest(
            messages=body.messages(),
            model=body.model,
            session_id=session_id,
            agent_type=agent_type,
            options=body.generation_options(),
            tools=ClientTools(*client_tools) if client_tools else None,
            parent_message_id=parent_message_id,
        ),
    )
    response_id = new_response_id(turn.conversation.id)
    turn.extra["response_id"] = response_id  # kept with the answer: a later turn may follow it
    previous = body.previous_response_id
    if container is not None:  # kept from expiring while the turn runs
        turn.events = containers.using(container, turn.events)
    if not body.stream:
        final = await unless_disconnected(http, turn.collect())
        return JSONResponse(
            finished(final, response_id, previous, steps=turn.steps, code_interpreter=output)
        )
    events = await start_stream(turn.events)
    return SSEResponse(
        response_events(events, response_id, previous, code_interpreter=output),
        headers=SSE_HEADERS,
        source=events,
    )
