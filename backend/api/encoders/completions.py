"""`/v1/chat/completions`: a turn as OpenAI's completion, or as its chunks.

An agent's steps ride in our extension fields (`agent_event` on a chunk with an
empty delta, `agent` on the first chunk and the completion), which OpenAI
clients ignore; an agent turn's citations (and the tables its runs showed) are the
completion's `metadata`.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from backend.api.encoders.links import linked, tables_metadata
from backend.api.errors import error_body
from backend.api.sse import Last, sse_data
from backend.core.events import STEP_TYPES, Final, TokenLogprob, TurnEvent, Usage
from backend.llm import LLMError


def citations_metadata(final: Final) -> dict[str, Any] | None:
    """An agent turn's citations. Plain chat leaves OpenAI's `metadata` unset, as OpenAI
    does, so strict clients of plain chat see OpenAI's shape."""
    if final.summary.agent_type == "chat":
        return None
    return {"citations": final.citations_payload(), **tables_metadata(final)}


def completion(final: Final) -> dict[str, Any]:
    """The whole completion of a finished turn."""
    message: dict[str, Any] = {"role": "assistant", "content": final.text}
    if final.tool_calls:
        calls = [call.model_dump(mode="json") for call in final.tool_calls]
        message.update(content=final.text or None, tool_calls=calls)
    logprobs = _logprobs(final.logprobs)
    body = {
        "id": new_completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": final.model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": final.finish_reason,
                "logprobs": {"content": logprobs} if logprobs else None,
            }
        ],
        "usage": usage_body(final.usage),
        "agent": final.summary.model_dump(mode="json"),  # our extension: who answered, how
    }
    metadata = citations_metadata(final)
    if metadata is not None:
        body["metadata"] = metadata
    return body


def _logprobs(logprobs: list[TokenLogprob] | None) -> list[dict[str, Any]]:
    """As the upstream sent them."""
    return [p.model_dump(mode="json", exclude_unset=True) for p in logprobs or ()]


async def completion_chunks(
    events: AsyncGenerator[TurnEvent, None], include_usage: bool
) -> AsyncIterator[str]:
    """OpenAI chunks, written as few times as the protocol allows.

    Each socket write costs more than building a chunk, so the role chunk goes out
    with the first token, and the closing chunks go out together with the end of
    the response (`Last`), before the turn is stored.
    """
    chunks: CompletionChunks | None = None
    session_id = ""
    pending = ""
    try:
        async with contextlib.aclosing(events):
            async for event in events:
                if event.type == "router":
                    chunks = CompletionChunks(event.model)
                    session_id = event.opening.session_id  # for the steps' URLs
                    # The first chunk carries our extension field; OpenAI clients ignore it.
                    opening = event.opening.model_dump(mode="json")
                    pending = sse_data(
                        chunks.chunk({"role": "assistant", "content": ""}, agent=opening)
                    )
                    continue
                if chunks is None:
                    raise RuntimeError("a turn's first event is `router`")
                if event.type == "token":
                    logprobs = [
                        p.model_dump(mode="json", exclude_unset=True) for p in event.logprobs or ()
                    ]
                    yield pending + sse_data(chunks.content(event.text, logprobs))
                    pending = ""
                elif event.type == "tool_calls":
                    calls = [
                        {"index": i, **call.model_dump(mode="json")}
                        for i, call in enumerate(event.calls)
                    ]
                    yield pending + sse_data(chunks.chunk({"tool_calls": calls}))
                    pending = ""
                elif event.type in STEP_TYPES:
                    # An agent's step rides in an extension field with an empty delta, which
                    # OpenAI clients read as "no new content".
                    step = linked(event.payload(), session_id)
                    yield pending + sse_data(chunks.chunk({}, agent_event=step))
                    pending = ""
                elif event.type == "final":
                    metadata = {"citations": event.citations_payload(), **tables_metadata(event)}
                    closing = [
                        pending,
                        sse_data(chunks.chunk({}, event.finish_reason, metadata=metadata)),
                    ]
                    if include_usage:
                        closing.append(sse_data(chunks.usage(event.usage)))
                    yield Last("".join(closing) + sse_data("[DONE]"))
    except LLMError as exc:
        error = error_body("/v1/", exc.status_code, exc.message, exc.code)
        yield Last(pending + sse_data(error) + sse_data("[DONE]"))


def new_completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def usage_body(usage: Usage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    prompt, completion = usage.prompt_tokens, usage.completion_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


_COMPACT = (",", ":")


class CompletionChunks:
    """The JSON of one streamed completion's chunks (`chat.completion.chunk`).

    Every chunk repeats the completion's id, creation time and model. A content
    delta, nearly every chunk, is that head encoded once around the encoded text.
    """

    def __init__(self, model: str) -> None:
        self.id = new_completion_id()
        self.model = model
        self.created = int(time.time())
        head = json.dumps(self._body([]), separators=_COMPACT).removesuffix("[]}")
        self._content_head = head + '[{"index":0,"delta":{"content":'

    def content(self, text: str, logprobs: list[dict[str, Any]] | None = None) -> str:
        if logprobs:
            return self.chunk({"content": text}, logprobs=logprobs)
        return f'{self._content_head}{json.dumps(text)}}},"finish_reason":null,"logprobs":null}}]}}'

    def chunk(
        self,
        delta: dict[str, Any],
        finish_reason: str | None = None,
        logprobs: list[dict[str, Any]] | None = None,
        **extra: Any,
    ) -> str:
        choice = {
            "index": 0,
            "delta": delta,
            "finish_reason": finish_reason,
            "logprobs": {"content": logprobs} if logprobs else None,
        }
        return json.dumps(self._body([choice], **extra), separators=_COMPACT)

    def usage(self, usage: Usage | None) -> str:
        """The extra last chunk of `stream_options.include_usage`: no choices, the usage."""
        return json.dumps(self._body([], usage=usage_body(usage)), separators=_COMPACT)

    def _body(self, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
            **extra,
        }
