"""OpenAI-compatible routes: any OpenAI client works against `/v1` unchanged."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from backend.api.attached_sources import attach_requested
from backend.api.deps import (
    ChatServiceDep,
    CurrentUser,
    DataSourcesDep,
    LLMDep,
    RightsDep,
    StoreDep,
)
from backend.api.disconnect import unless_disconnected
from backend.api.encoders.completions import completion, completion_chunks
from backend.api.errors import OPENAI_CLIENT_ERRORS, ApiError
from backend.api.openai_params import check_parameters
from backend.api.sse import SSE_HEADERS, SSEResponse, sse_responses
from backend.api.streaming import start_stream
from backend.core.agents.client_tools import ClientTools
from backend.core.group_rights import ModelNotAllowed
from backend.core.turn import TurnRequest
from backend.llm.embeddings import create_embeddings
from backend.models.openai import (
    ChatCompletionRequest,
    EmbeddingRequest,
)

router = APIRouter(prefix="/v1", tags=["openai"], responses=OPENAI_CLIENT_ERRORS)


@router.get("/models")
async def read_models(llm: LLMDep, rights: RightsDep, user: CurrentUser) -> dict[str, Any]:
    """The models this server can answer you with (those your groups give you), in
    OpenAI's list shape."""
    models = await rights.models(user)
    owner = llm.name
    return {
        "object": "list",
        "data": [{"id": m, "object": "model", "created": 0, "owned_by": owner} for m in models],
    }


@router.post("/embeddings")
async def create_embedding(
    body: EmbeddingRequest, user: CurrentUser, llm: LLMDep, rights: RightsDep
) -> dict[str, Any]:
    """Embeddings from Ollama or the OpenAI-compatible upstream, in OpenAI's shape."""
    if not (await rights.of(user)).may_use_model(body.model):
        raise ModelNotAllowed(body.model)
    return await create_embeddings(llm, body.model, body.texts, body.encoding_format, body.extra)


@router.post(
    "/chat/completions",
    responses=sse_responses("A completion: JSON, or chunks as events with `stream: true`."),
)
async def create_chat_completion(
    body: ChatCompletionRequest,
    user: CurrentUser,
    chat: ChatServiceDep,
    store: StoreDep,
    sources: DataSourcesDep,
    http: Request,
) -> Response:
    """Chat completion, plain JSON or SSE with `stream: true`."""
    response_format = body.response_format_dict
    client_tools = body.client_tools
    check_parameters(
        body.unsupported_parameter(),
        body.agent_type,
        response_format=response_format,
        tools=client_tools,
        logprobs=body.logprobs or None,
    )
    if body.logprobs and not chat.llm.supports_logprobs:
        raise ApiError(
            400,
            f"Unsupported parameter: 'logprobs' needs a backend that reports token "
            f"probabilities (the {chat.llm.name} backend does not).",
            code="unsupported_parameter",
            param="logprobs",
        )
    attach_requested(store, sources, user, body.session_id, body.data_sources)
    turn_request = TurnRequest(
        messages=body.langchain_messages(),
        model=body.model,
        session_id=body.session_id,
        agent_type=body.agent_type,
        options=body.generation_options(),
        tools=ClientTools(*client_tools) if client_tools else None,
    )
    turn = await chat.open_turn(user, turn_request)
    if not body.stream:
        return JSONResponse(completion(await unless_disconnected(http, turn.collect())))
    events = await start_stream(turn.events)
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    return SSEResponse(completion_chunks(events, include_usage), headers=SSE_HEADERS, source=events)
