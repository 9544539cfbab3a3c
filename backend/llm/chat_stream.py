"""A chat model as a stream of events: the one shape plain chat reads.

A `ChatStream` is called with the messages and the backend's call arguments
and yields the typed events of `stream.py`. LangChain chat models are wrapped
by `langchain_stream`; the `openai` and `ollama` backends stream straight from
the upstream (`upstream.py`).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from backend.llm.stream import (
    ChatEvent,
    ClientToolCall,
    Finish,
    FunctionCall,
    ToolCalls,
    Usage,
    answer_delta,
    finish,
)

ChatStream = Callable[[list[BaseMessage], dict[str, Any]], AsyncGenerator[ChatEvent, None]]


def new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


def usage_event(prompt_tokens: int, completion_tokens: int) -> Usage:
    return Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


class CallPieces:
    """Tool calls as they stream: ids, names and argument text arrive in pieces."""

    def __init__(self) -> None:
        self._slots: dict[int, dict[str, str]] = {}

    def add(
        self, index: int | None, call_id: str | None, name: str | None, args: str | None
    ) -> None:
        slot = self._slots.setdefault(
            len(self._slots) if index is None else index, {"id": "", "name": "", "args": ""}
        )
        slot["id"] = slot["id"] or call_id or ""
        slot["name"] += name or ""
        slot["args"] += args or ""

    def event(self) -> ToolCalls | None:
        """The calls in OpenAI's shape, or None when the model called nothing."""
        if not self._slots:
            return None
        calls = [
            ClientToolCall(
                id=slot["id"] or new_call_id(),
                function=FunctionCall(name=slot["name"], arguments=slot["args"] or "{}"),
            )
            for _, slot in sorted(self._slots.items())
        ]
        return ToolCalls(calls=calls)

    def ending(self, reason: str | None) -> list[ToolCalls | Finish]:
        """The stream's last events: the calls, if any, then why it finished."""
        calls = self.event()
        return [calls, Finish(reason="tool_calls")] if calls else [finish(reason)]


def langchain_stream(model: BaseChatModel) -> ChatStream:
    """`model`'s streamed reply as events."""

    async def stream(
        messages: list[BaseMessage], call_kwargs: dict[str, Any]
    ) -> AsyncGenerator[ChatEvent, None]:
        pieces = CallPieces()
        reason: str | None = None
        chunks = cast(AsyncGenerator[Any, None], model.astream(messages, **call_kwargs))
        async with contextlib.aclosing(chunks):
            async for chunk in chunks:
                if chunk.text:
                    yield answer_delta(str(chunk.text), chunk.response_metadata.get("logprobs"))
                _gather(chunk, pieces)
                metadata = chunk.response_metadata
                reason = metadata.get("finish_reason") or metadata.get("done_reason") or reason
                usage = getattr(chunk, "usage_metadata", None)
                if usage:
                    yield usage_event(usage["input_tokens"], usage["output_tokens"])
        for event in pieces.ending(reason):
            yield event

    return stream


def _gather(chunk: Any, pieces: CallPieces) -> None:
    """Fold a chunk's tool-call pieces (streamed names and argument text) into `pieces`."""
    for piece in getattr(chunk, "tool_call_chunks", None) or []:
        pieces.add(piece.get("index"), piece.get("id"), piece.get("name"), piece.get("args"))
    if not getattr(chunk, "tool_call_chunks", None):  # a backend that hands over whole calls
        for call in getattr(chunk, "tool_calls", None) or []:
            pieces.add(None, call.get("id"), call["name"], json.dumps(call["args"]))
