"""The OpenAI chat-completions wire format, request and response.

Responses are built as plain dicts: they sit on the streaming hot path, and
their shape is fixed by OpenAI's API, not by us.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ConfigDict, Field

from backend.core.router import AgentType
from backend.models.common import SessionId, Text


class TextPart(BaseModel):
    type: Literal["text"]
    text: Text


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant"]
    content: Text | list[TextPart] | None = None

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: Text = Field(min_length=1)
    messages: list[ChatMessageIn] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: Text | list[Text] | None = None
    n: int = Field(default=1, ge=1, le=1, description="Only one choice is supported.")
    # Extensions: which agent answers, and which stored session to continue.
    agent_type: AgentType = "auto"
    session_id: SessionId | None = None

    def langchain_messages(self) -> list[BaseMessage]:
        converted: list[BaseMessage] = []
        for message in self.messages:
            if message.role in ("system", "developer"):
                converted.append(SystemMessage(message.text))
            elif message.role == "user":
                converted.append(HumanMessage(message.text))
            else:
                converted.append(AIMessage(message.text))
        return converted

    @property
    def stop_list(self) -> list[str] | None:
        return [self.stop] if isinstance(self.stop, str) else self.stop


def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def usage_body(usage: dict[str, int]) -> dict[str, int] | None:
    if not usage:
        return None
    prompt, completion = usage["prompt_tokens"], usage["completion_tokens"]
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def completion_body(
    completion_id: str,
    model: str,
    content: str,
    finish_reason: str,
    usage: dict[str, int],
    metadata: dict[str, Any],
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": usage_body(usage),
        "metadata": metadata,
    }


def chunk_body(
    completion_id: str,
    model: str,
    delta: dict[str, Any],
    finish_reason: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
        **extra,
    }
