"""Plain chat: the model answers directly, streamed token by token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from backend.core.events import AgentEvent


async def run_chat(
    model: BaseChatModel,
    messages: list[BaseMessage],
    call_kwargs: dict[str, Any],
) -> AsyncIterator[AgentEvent]:
    async for chunk in model.astream(messages, **call_kwargs):
        if chunk.text:
            yield AgentEvent("token", {"text": str(chunk.text)})
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
