"""Plain chat's prompt, measured against the model's window before it is sent.

A client's own messages are its own: if they cannot fit, the request is refused as
OpenAI refuses it (400 `context_length_exceeded`), never sent to be cut silently.
A stored conversation that the server adds (a request with `session_id` and only
its new message) is ours to fit: its oldest messages go first, and the turn says so.
If the upstream then reports reading fewer prompt tokens than were sent, the turn
says that too.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from backend.core.agents.client_tools import ClientTools
from backend.core.events import AgentEvent, ContextFitted, Usage
from backend.llm import LLMBackend, LLMError
from backend.llm.context import (
    ContextOverflow,
    Measured,
    cut_notice,
    fit_prompt,
    schema_tokens,
    trimmed_notice,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChatPrompt:
    messages: list[BaseMessage]
    measured: Measured
    notice: ContextFitted | None = None  # the stored history was fitted
    checked: bool = True  # whether the upstream's reported prompt size is checked


async def fit_chat(
    llm: LLMBackend,
    model: str,
    messages: list[BaseMessage],
    client_tools: ClientTools | None,
    wanted: int | None,
    *,
    ours: bool,
) -> ChatPrompt:
    """`messages` measured with the client's tools and the `wanted` reply tokens, and
    fitted when `ours` (the server added the history)."""
    window = await llm.context_window(model)
    count, exact = llm.token_counter
    tools = client_tools.tools if client_tools is not None else None
    if not ours:
        tokens = count(messages) + schema_tokens(tools)
        if tokens + (wanted or 0) > window:
            raise _too_long(window, tokens, wanted)
        measured = Measured(tokens, window - (wanted or 0), window, exact)
        return ChatPrompt(messages, measured, checked=llm.may_cut_prompts)
    try:
        fit, measured = fit_prompt(messages, window, count, exact, wanted=wanted, tools=tools)
    except ContextOverflow as exc:
        raise _too_long(window, exc.needed, wanted) from None
    notice = trimmed_notice("chat", window, fit, measured.tokens) if fit.trimmed else None
    if notice is not None:
        logger.info("%s (plain chat, model %s)", notice.message, model)
    return ChatPrompt(fit.messages, measured, notice, llm.may_cut_prompts)


async def with_context_notes(
    prompt: ChatPrompt, events: AsyncGenerator[AgentEvent, None]
) -> AsyncGenerator[AgentEvent, None]:
    """`events`, after the fitted history's notice, with a notice where the upstream's
    usage says it read less than it was sent."""
    if prompt.notice is not None:
        yield prompt.notice
    measured = prompt.measured
    async with aclosing(events):
        async for event in events:
            yield event
            if prompt.checked and isinstance(event, Usage) and measured.cut_by(event.prompt_tokens):
                notice = cut_notice("chat", measured.window, measured.tokens, event.prompt_tokens)
                logger.warning("%s (plain chat)", notice.message)
                yield notice


def _too_long(window: int, tokens: int, wanted: int | None) -> LLMError:
    """OpenAI's own words for a prompt that does not fit."""
    if wanted:
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{tokens + wanted} tokens ({tokens} in the messages, {wanted} in the completion). "
            "Please reduce the length of the messages or completion."
        )
    else:
        message = (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {tokens} tokens. Please reduce the length of the messages."
        )
    return LLMError(message, status_code=400, code="context_length_exceeded")
