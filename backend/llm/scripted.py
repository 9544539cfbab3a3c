"""A chat model that replays scripted replies, for tests that need exact answers.

Replies come from a list or a JSON file: strings, or objects
`{"content": str, "when": str | [str], "repeat": bool, "token_delay": seconds}`, or
`{"error": str, "when": ...}` to fail that call as an unreachable upstream would.
Each call takes the first unused reply whose `when` occurs in the last user
message (a list: all of them; no `when` matches anything); a reply is used up
unless `repeat` is true. Streaming splits a reply into word tokens, paced by
`token_delay`, so tests can disconnect mid-stream.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from pydantic import PrivateAttr, field_validator

_TOKEN = re.compile(r"\s*\S+")


class ScriptExhausted(Exception):
    """Every scripted reply has been used."""


class ScriptedFailure(Exception):
    """A reply that scripts a failed call."""


class ScriptedChatModel(BaseChatModel):
    replies: list[dict[str, Any]]
    model_name: str = "scripted"
    _used: set[int] = PrivateAttr(default_factory=set)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @field_validator("replies", mode="before")
    @classmethod
    def _strings_are_contents(cls, replies: list[str | dict[str, Any]]) -> list[dict[str, Any]]:
        return [r if isinstance(r, dict) else {"content": r} for r in replies]

    @classmethod
    def from_file(cls, path: str | Path) -> ScriptedChatModel:
        return cls(replies=json.loads(Path(path).read_text()))

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _next_reply(self, messages: list[BaseMessage]) -> dict[str, Any]:
        last_user = next((str(m.text) for m in reversed(messages) if m.type == "human"), "")
        with self._lock:
            for index in range(len(self.replies)):
                reply = self.replies[index]
                if index in self._used or not _matches(reply.get("when", ""), last_user):
                    continue
                if not reply.get("repeat"):
                    self._used.add(index)
                if "error" in reply:
                    raise ScriptedFailure(reply["error"])
                return reply
        raise ScriptExhausted(f"no scripted reply is left for {last_user[:60]!r}")

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self._next_reply(messages)
        message = AIMessage(content=reply["content"], usage_metadata=_usage(messages, reply))
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        reply = self._next_reply(messages)
        for token in _TOKEN.findall(reply["content"]):
            time.sleep(reply.get("token_delay", 0))
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))
        yield _final_chunk(messages, reply)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        reply = self._next_reply(messages)
        for token in _TOKEN.findall(reply["content"]):
            await asyncio.sleep(reply.get("token_delay", 0))
            yield ChatGenerationChunk(message=AIMessageChunk(content=token))
        yield _final_chunk(messages, reply)


def _matches(when: str | list[str], text: str) -> bool:
    return all(part in text for part in ([when] if isinstance(when, str) else when))


def _usage(messages: list[BaseMessage], reply: dict[str, Any]) -> Any:
    prompt = sum(len(_TOKEN.findall(str(m.content))) for m in messages)
    completion = len(_TOKEN.findall(reply["content"]))
    return {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _final_chunk(messages: list[BaseMessage], reply: dict[str, Any]) -> ChatGenerationChunk:
    return ChatGenerationChunk(
        message=AIMessageChunk(content="", usage_metadata=_usage(messages, reply))
    )
