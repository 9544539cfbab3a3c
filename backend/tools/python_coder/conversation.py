"""One task's conversation with the model: `generate`, then the stages that follow it.

A model with a long context (`ModelProfile.long_context`) keeps one
conversation per task: `generate` opens it after the turn's head, and each later
stage (review, modify, fix, answer) is a short follow-up after the model's own
replies. Its server has the whole conversation cached already, so a follow-up
costs only its own few tokens, and the review judges the code in the context it
was written in. A small model gets each stage as a short prompt of its own.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Callable
from typing import TypeVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel

from backend.llm.turn import Stage, TurnLLM
from backend.tools.python_coder import prompts

T = TypeVar("T", bound=BaseModel)

_CHECK = re.compile(r"^\s*\**check\**\s*:\**\s*(.+)$", re.IGNORECASE | re.MULTILINE)
_SAYS_NO = re.compile(r"^\W*(no|not|partly|partially|only)\b", re.IGNORECASE)


def self_check(reply: str) -> str | None:
    """What the model's `Check:` line after its code says, if it wrote one."""
    found = _CHECK.findall(reply)
    return found[-1].strip() if found else None


def check_says_no(check: str | None) -> bool:
    """The model's own check says the code does not answer all of INPUT."""
    return check is not None and bool(_SAYS_NO.match(check))


class Conversation:
    def __init__(self, llm: TurnLLM) -> None:
        self.llm = llm
        self.continues = llm.profile.long_context
        self.messages: list[BaseMessage] = []  # the task's conversation so far

    def _prompt(self, followup: str, standalone: Callable[[], str]) -> list[BaseMessage]:
        if self.continues and self.messages:
            return [*self.messages, HumanMessage(followup)]
        return self.llm.messages(prompts.SYSTEM, standalone())

    def _keep(self, messages: list[BaseMessage], reply: str) -> None:
        if self.continues:
            self.messages = [*messages, AIMessage(reply)]

    async def text(self, stage: Stage, followup: str, standalone: Callable[[], str]) -> str:
        """The model's reply to `followup`, or to the `standalone` prompt where there is no
        conversation to follow (the first stage, or a model that gets one prompt a stage)."""
        messages = self._prompt(followup, standalone)
        reply = await self.llm.ask(stage, messages)
        self._keep(messages, reply)
        return reply

    async def json(
        self, stage: Stage, followup: str, standalone: Callable[[], str], schema: type[T]
    ) -> T:
        """`text`, constrained to and parsed as `schema` (`StructuredReplyError` if it is not)."""
        messages = self._prompt(followup, standalone)
        verdict = await self.llm.ask_json(stage, messages, schema)
        self._keep(messages, verdict.model_dump_json())
        return verdict

    def stream(
        self, stage: Stage, followup: str, standalone: Callable[[], str]
    ) -> AsyncGenerator[str, None]:
        """`text` as it is generated (closing it stops the model); it ends the conversation."""
        return self.llm.stream(stage, self._prompt(followup, standalone))
