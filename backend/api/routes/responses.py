"""`POST /v1/responses`: OpenAI's Responses API over the same chat turns.

`previous_response_id` continues that response's conversation (backend/core/responses.py),
its stored history prepended as for `/v1/chat/completions` with a `session_id`.
Streaming sends the standard typed events.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from backend.api.attached_sources import attach_requested
from backend.api.bodies import UploadQuota
from backend.api.code_interpreter import (
    check_tools,
    interpreter_agent,
    interpreter_container,
    interpreter_output,
)
from backend.api.deps import (
    ChatServiceDep,
    ContainersDep,
    CurrentUser,
    DataSourcesDep,
    LimitsDep,
    StoreDep,
)
from backend.api.disconnect import unless_disconnected
from backend.api.encoders.responses import finished, response_events
from backend.api.errors import OPENAI_CLIENT_ERRORS
from backend.api.openai_params import check_parameters
from backend.api.sse import SSE_HEADERS, SSEResponse, sse_responses
from backend.api.streaming import start_stream
from backend.core.agents.client_tools import ClientTools
from backend.core.responses import continued
from backend.core.turn import TurnRequest, collect
from backend.models.responses import ResponseRequest
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
    sources: DataSourcesDep,
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
    session_id, parent_message_id = body.session_id, None
    conversation = None
    if body.previous_response_id is not None:  # ResponseNotFound: a 404 (errors.py)
        previous = continued(store, user.id, body.previous_response_id)
        conversation = previous.conversation
        session_id, parent_message_id = conversation.session_id, previous.parent_message_id
    container = output = None
    if interpreter is not None:
        continuing = conversation.session_key if conversation else None
        container = await interpreter_container(
            containers, UploadQuota(limits, user), interpreter, continuing
        )
        session_id = client_id(container.session_key)
        output = interpreter_output(container.id, str(http.base_url), body)
    attach_requested(store, sources, user, session_id, body.data_sources)
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
            response=True,
        ),
    )
    response_id = turn.plan.response_id or ""
    previous_id = body.previous_response_id
    events = turn.events
    if container is not None:  # kept from expiring while the turn runs
        events = containers.using(container, events)
    if not body.stream:
        final = await unless_disconnected(http, collect(events))
        return JSONResponse(
            finished(final, response_id, previous_id, steps=turn.steps, code_interpreter=output)
        )
    streamed = await start_stream(events)
    return SSEResponse(
        response_events(streamed, response_id, previous_id, code_interpreter=output),
        headers=SSE_HEADERS,
        source=streamed,
    )
