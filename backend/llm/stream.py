"""What a chat model's stream yields: typed events, the first part of a turn's stream.

A backend's `ChatStream` (see `chat_stream.py`) may first yield `Accepted` (the
upstream took the request, so a response can start while the model thinks),
then `AnswerDelta`s, `ToolCalls` (native calls of the client's tools), `Usage`
and `Finish`. `backend/core/events.py` adds the agents' events to these, and
each wire format in `backend/api/encoders/` encodes the whole union.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, cast

from pydantic import BaseModel, ConfigDict

FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]


class Event(BaseModel):
    """One event of a turn. `payload()` is its JSON on the wire: its `type`, then its
    fields, less those it does not know (None or never given, such as a ReAct step's
    plan index) unless `SENT_AS_NULL` names them."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    SENT_AS_NULL: ClassVar[frozenset[str]] = frozenset()

    type: str

    def payload(self) -> dict[str, Any]:
        fields = self.model_dump(mode="json", exclude_unset=True, exclude={"type"})
        known = {k: v for k, v in fields.items() if v is not None or k in self.SENT_AS_NULL}
        return {"type": self.type, **known}


class TopLogprob(BaseModel):
    """An alternative token. Upstreams differ in what they add (OpenAI: `bytes`)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    token: str
    logprob: float


class TokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob] = []


class Accepted(Event):
    type: Literal["accepted"] = "accepted"


class AnswerDelta(Event):
    """The next piece of the answer, as the model produced it."""

    type: Literal["token"] = "token"
    text: str
    logprobs: list[TokenLogprob] | None = None


class FunctionCall(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    arguments: str  # JSON text, as OpenAI sends it


class ClientToolCall(BaseModel):
    """A call of one of the client's own tools, in OpenAI's shape."""

    model_config = ConfigDict(frozen=True)

    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class ToolCalls(Event):
    type: Literal["tool_calls"] = "tool_calls"
    calls: list[ClientToolCall]


class Usage(Event):
    type: Literal["usage"] = "usage"
    prompt_tokens: int
    completion_tokens: int


class Finish(Event):
    type: Literal["finish"] = "finish"
    reason: FinishReason


ChatEvent = Accepted | AnswerDelta | ToolCalls | Usage | Finish


def finish(reason: str | None) -> Finish:
    """OpenAI's finish reasons; anything else an upstream says is a plain stop."""
    known = reason in ("length", "tool_calls", "content_filter")
    return Finish(reason=cast(FinishReason, reason) if known else "stop")


def answer_delta(text: str, logprobs: list[Any] | None = None) -> AnswerDelta:
    """A delta with the upstream's logprobs, when it sent some."""
    if logprobs:
        return AnswerDelta(text=text, logprobs=[TokenLogprob.model_validate(p) for p in logprobs])
    return AnswerDelta(text=text)
