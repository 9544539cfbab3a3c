"""OpenAI-compatible routes: any OpenAI client works against `/v1` unchanged."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from backend.api.deps import ChatServiceDep, CurrentUser, LLMDep
from backend.api.disconnect import unless_disconnected
from backend.api.errors import OPENAI_CLIENT_ERRORS, ApiError, error_body
from backend.api.sse import SSE_HEADERS, Last, SSEResponse, sse_data, sse_responses
from backend.api.streaming import start_stream
from backend.core.agents.client_tools import ClientTools
from backend.core.chat_service import Turn, TurnRequest
from backend.core.events import STEP_EVENTS, AgentEvent
from backend.llm import LLMError
from backend.llm.embeddings import create_embeddings
from backend.models.openai import (
    ChatCompletionRequest,
    CompletionChunks,
    EmbeddingRequest,
    completion_body,
    new_completion_id,
)

router = APIRouter(prefix="/v1", tags=["openai"], responses=OPENAI_CLIENT_ERRORS)


def check_parameters(unsupported: str | None, agent_type: str, **for_chat: object) -> None:
    """400s naming a parameter: one the server cannot honour, or one (of `for_chat`, given)
    that only plain chat answers while the request asks for an agent."""
    if unsupported is not None:
        raise ApiError(
            400,
            f"Unsupported parameter: '{unsupported}' is not supported by this server.",
            code="unsupported_parameter",
            param=unsupported,
        )
    for param, given in for_chat.items():
        if given is not None and agent_type not in ("auto", "chat"):
            raise ApiError(
                400,
                f"{param} is answered by plain chat: use agent_type 'chat' or 'auto'.",
                code="unsupported_parameter",
                param=param,
            )


@router.get("/models")
async def read_models(llm: LLMDep, user: CurrentUser) -> dict[str, Any]:
    """The models this server can answer with, in OpenAI's list shape."""
    models = await llm.list_models()
    owner = llm.name
    return {
        "object": "list",
        "data": [{"id": m, "object": "model", "created": 0, "owned_by": owner} for m in models],
    }


@router.post("/embeddings")
async def create_embedding(
    body: EmbeddingRequest, user: CurrentUser, llm: LLMDep
) -> dict[str, Any]:
    """Embeddings from Ollama or the OpenAI-compatible upstream, in OpenAI's shape."""
    return await create_embeddings(llm, body.model, body.texts, body.encoding_format, body.extra)


@router.post(
    "/chat/completions",
    responses=sse_responses("A completion: JSON, or chunks as events with `stream: true`."),
)
async def create_chat_completion(
    body: ChatCompletionRequest, user: CurrentUser, chat: ChatServiceDep, http: Request
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
        answer = await unless_disconnected(http, turn.collect())
        return JSONResponse(
            completion_body(
                new_completion_id(),
                turn.model,
                answer,
                turn.finish_reason,
                turn.usage,
                turn.metadata,
                turn.tool_calls,
                turn.logprobs,
                turn.response_metadata,
            )
        )
    events = await start_stream(turn.events)
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    return SSEResponse(_completion_chunks(turn, events, include_usage), headers=SSE_HEADERS)


def _metadata(turn: Turn) -> dict[str, Any]:
    metadata = turn.response_metadata
    return {} if metadata is None else {"metadata": metadata}


async def _completion_chunks(
    turn: Turn, events: AsyncGenerator[AgentEvent, None], include_usage: bool
) -> AsyncIterator[str]:
    """OpenAI chunks, written as few times as the protocol allows.

    Each socket write costs more than building a chunk, so the role chunk goes out
    with the first token, and the closing chunks go out together with the end of
    the response (`Last`), before the turn is stored.
    """
    chunks = CompletionChunks(turn.model)
    # The first chunk carries our extension field; OpenAI clients ignore it.
    pending = sse_data(chunks.chunk({"role": "assistant", "content": ""}, agent=turn.metadata))
    try:
        async with contextlib.aclosing(events):
            async for event in events:
                if event.type == "token":
                    yield pending + sse_data(
                        chunks.content(event.data["text"], event.data.get("logprobs"))
                    )
                    pending = ""
                elif event.type == "tool_calls":
                    calls = [{"index": i, **call} for i, call in enumerate(event.data["calls"])]
                    yield pending + sse_data(chunks.chunk({"tool_calls": calls}))
                    pending = ""
                elif event.type in STEP_EVENTS:
                    # An agent's step rides in an extension field with an empty delta, which
                    # OpenAI clients read as "no new content".
                    step = {"type": event.type, **event.data}
                    yield pending + sse_data(chunks.chunk({}, agent_event=step))
                    pending = ""
                elif event.type == "final":
                    metadata = {"citations": turn.citations}
                    closing = [
                        pending,
                        sse_data(chunks.chunk({}, turn.finish_reason, metadata=metadata)),
                    ]
                    if include_usage:
                        closing.append(sse_data(chunks.usage(turn.usage)))
                    yield Last("".join(closing) + sse_data("[DONE]"))
    except LLMError as exc:
        error = error_body("/v1/", exc.status_code, exc.message, exc.code)
        yield Last(pending + sse_data(error) + sse_data("[DONE]"))
