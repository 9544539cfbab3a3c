"""Plain chat: the model answers directly, streamed token by token."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any, cast

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from backend.core.events import AgentEvent


async def run_chat(
    model: BaseChatModel,
    messages: list[BaseMessage],
    call_kwargs: dict[str, Any],
) -> AsyncGenerator[AgentEvent, None]:
    chunks = cast(AsyncGenerator[Any, None], model.astream(messages, **call_kwargs))
    async with contextlib.aclosing(chunks) as stream:
        async for chunk in stream:
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
