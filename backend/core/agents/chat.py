"""Plain chat: the model answers directly, streamed token by token.

With the client's own tools (OpenAI `tools`) the answer may instead be tool
calls: natively where the backend has tool calling, else through a prompt and
a JSON call (constrained by `forced_kwargs` when a call is required).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from backend.core.agents.client_tools import ClientTools, ToolCall, as_plain_messages
from backend.core.events import AgentEvent
from backend.core.llm import LLMError

_MAYBE_A_CALL = "{`<"  # how a reply that holds a call (JSON, a fence, reasoning first) opens


async def run_chat(
    model: BaseChatModel,
    messages: list[BaseMessage],
    call_kwargs: dict[str, Any],
    tools: ClientTools | None = None,
    native_kwargs: dict[str, Any] | None = None,
    forced_kwargs: dict[str, Any] | None = None,
) -> AsyncGenerator[AgentEvent, None]:
    """`native_kwargs`: the backend's own tool arguments, or None to prompt for calls."""
    if tools is None or tools.choice == "none":
        async for event in _chat(model, messages, call_kwargs, []):
            yield event
    elif native_kwargs is not None:
        calls: list[ToolCall] = []
        async for event in _chat(model, messages, {**call_kwargs, **native_kwargs}, calls):
            yield event
        async for event in _called(calls):
            yield event
    else:
        async for event in _prompted(model, messages, call_kwargs, tools, forced_kwargs or {}):
            yield event


async def _chat(
    model: BaseChatModel,
    messages: list[BaseMessage],
    call_kwargs: dict[str, Any],
    calls: list[ToolCall],
) -> AsyncGenerator[AgentEvent, None]:
    """Stream the reply's text; native tool calls are gathered into `calls`."""
    pieces: dict[int, dict[str, str]] = {}
    chunks = cast(AsyncGenerator[Any, None], model.astream(messages, **call_kwargs))
    async with contextlib.aclosing(chunks) as stream:
        async for chunk in stream:
            if chunk.text:
                yield AgentEvent("token", {"text": str(chunk.text)})
            _gather(chunk, pieces)
            finish = chunk.response_metadata.get("finish_reason") or chunk.response_metadata.get(
                "done_reason"
            )
            if finish:
                yield AgentEvent("finish", {"reason": "length" if finish == "length" else "stop"})
            usage = getattr(chunk, "usage_metadata", None)
            if usage:
                yield AgentEvent(
                    "usage",
                    {
                        "prompt_tokens": usage["input_tokens"],
                        "completion_tokens": usage["output_tokens"],
                    },
                )
    calls.extend(
        ToolCall(p["id"] or f"call_{index}", p["name"], p["args"] or "{}")
        for index, p in sorted(pieces.items())
    )


def _gather(chunk: Any, pieces: dict[int, dict[str, str]]) -> None:
    """Fold a chunk's tool-call pieces (streamed names and argument text) into `pieces`."""
    chunk_pieces = getattr(chunk, "tool_call_chunks", None) or []
    if not chunk_pieces:  # a backend that hands over whole calls
        chunk_pieces = [
            {"index": None, "id": c.get("id"), "name": c["name"], "args": json.dumps(c["args"])}
            for c in getattr(chunk, "tool_calls", None) or []
        ]
    for piece in chunk_pieces:
        index = piece.get("index")
        if index is None:
            index = len(pieces)
        slot = pieces.setdefault(index, {"id": "", "name": "", "args": ""})
        slot["id"] = slot["id"] or piece.get("id") or ""
        slot["name"] += piece.get("name") or ""
        slot["args"] += piece.get("args") or ""


async def _called(calls: list[ToolCall]) -> AsyncGenerator[AgentEvent, None]:
    if calls:
        yield AgentEvent("tool_calls", {"calls": [call.public() for call in calls]})
        yield AgentEvent("finish", {"reason": "tool_calls"})


async def _prompted(
    model: BaseChatModel,
    messages: list[BaseMessage],
    call_kwargs: dict[str, Any],
    tools: ClientTools,
    forced_kwargs: dict[str, Any],
) -> AsyncGenerator[AgentEvent, None]:
    """Tools described in a system message; a reply that is a JSON call becomes a call.

    A required call is decoded under the call's schema and never shown as text. With
    `auto`, text streams as usual unless the reply opens like JSON, a fence or a
    reasoning block (`<think>`), which is held back until it is known to be a call or not.
    """
    prompt = [tools.prompt(), *as_plain_messages(messages)]
    kwargs = {**call_kwargs, **forced_kwargs} if tools.required else call_kwargs
    held: list[str] = []  # text not shown yet: it may be a call
    showing = False  # the reply is prose: stream it
    finish = AgentEvent("finish", {"reason": "stop"})
    async for event in _chat(model, prompt, kwargs, []):
        if event.type == "finish":
            finish = event
        elif event.type != "token" or showing:
            yield event
        else:
            held.append(event.data["text"])
            opening = "".join(held).lstrip()
            if not tools.required and opening and opening[0] not in _MAYBE_A_CALL:
                showing = True
                yield AgentEvent("token", {"text": "".join(held)})
    if showing:
        yield finish
        return
    text = "".join(held)
    call = tools.parse(text)
    if call is not None:
        async for event in _called([call]):
            yield event
        return
    if tools.required:
        names = ", ".join(t["function"]["name"] for t in tools.offered)
        raise LLMError(f"The model did not produce a valid call to {names}.", status_code=502)
    if text:
        yield AgentEvent("token", {"text": text})
    yield finish
