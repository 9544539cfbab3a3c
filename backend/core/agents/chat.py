"""Plain chat: the model answers directly, streamed token by token.

With the client's own tools (OpenAI `tools`) the answer may instead be tool
calls: natively where the backend has tool calling, else through a prompt and
a JSON call (constrained by `forced_kwargs` when a call is required).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any

from langchain_core.messages import BaseMessage

from backend.core.agents.client_tools import ClientTools, as_plain_messages
from backend.llm import LLMError
from backend.llm.chat_stream import ChatStream
from backend.llm.stream import AnswerDelta, ChatEvent, Finish, ToolCalls

_MAYBE_A_CALL = "{`<"  # how a reply that holds a call (JSON, a fence, reasoning first) opens


def run_chat(
    stream: ChatStream,
    messages: list[BaseMessage],
    call_kwargs: dict[str, Any],
    tools: ClientTools | None = None,
    native_kwargs: dict[str, Any] | None = None,
    forced_kwargs: dict[str, Any] | None = None,
) -> AsyncGenerator[ChatEvent, None]:
    """`native_kwargs`: the backend's own tool arguments, or None to prompt for calls."""
    if tools is None or tools.choice == "none":
        return stream(messages, call_kwargs)
    if native_kwargs is not None:
        return stream(messages, {**call_kwargs, **native_kwargs})
    return _prompted(stream, messages, call_kwargs, tools, forced_kwargs or {})


async def _prompted(
    stream: ChatStream,
    messages: list[BaseMessage],
    call_kwargs: dict[str, Any],
    tools: ClientTools,
    forced_kwargs: dict[str, Any],
) -> AsyncGenerator[ChatEvent, None]:
    """Tools described in a system message; a reply that is a JSON call becomes a call.

    A required call is decoded under the call's schema and never shown as text. With
    `auto`, text streams as usual unless the reply opens like JSON, a fence or a
    reasoning block (`<think>`), which is held back until it is known to be a call or not.
    """
    prompt = [tools.prompt(), *as_plain_messages(messages)]
    kwargs = {**call_kwargs, **forced_kwargs} if tools.required else call_kwargs
    held: list[str] = []  # text not shown yet: it may be a call
    showing = False  # the reply is prose: stream it
    finish = Finish(reason="stop")
    async with contextlib.aclosing(stream(prompt, kwargs)) as events:
        async for event in events:
            if isinstance(event, Finish):
                finish = event
            elif not isinstance(event, AnswerDelta) or showing:
                yield event
            else:
                held.append(event.text)
                opening = "".join(held).lstrip()
                if not tools.required and opening and opening[0] not in _MAYBE_A_CALL:
                    showing = True
                    yield AnswerDelta(text="".join(held))
    if showing:
        yield finish
        return
    text = "".join(held)
    call = tools.parse(text)
    if call is not None:
        yield ToolCalls(calls=[call.public()])
        yield Finish(reason="tool_calls")
        return
    if tools.required:
        names = ", ".join(t["function"]["name"] for t in tools.offered)
        raise LLMError(f"The model did not produce a valid call to {names}.", status_code=502)
    if text:
        yield AnswerDelta(text=text)
    yield finish
