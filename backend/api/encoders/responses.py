"""`/v1/responses`: a turn as OpenAI's Responses API, one response or its typed events.

Streaming sends the standard events, numbered in order: `response.created`, the
output text's deltas, then the items' closing events and `response.completed`.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from backend.api.sse import Last, sse_data
from backend.core.events import ClientToolCall, Final, TurnEvent, Usage
from backend.llm import LLMError


def finished(
    final: Final, response_id: str, previous: str | None, message_id: str = ""
) -> dict[str, Any]:
    """The whole response of a finished turn."""
    message_id = message_id or f"msg_{uuid.uuid4().hex}"
    output = [message_item(message_id, final.text)] if final.text or not final.tool_calls else []
    output += [function_call_item(call) for call in final.tool_calls]
    status = "incomplete" if final.finish_reason == "length" else "completed"
    agent = final.summary.model_dump(mode="json")
    body = response_body(response_id, final.model, status, output, final.usage, agent, previous)
    if final.tables:  # our extension, as on chat completions' metadata
        body["tables"] = [table.payload() for table in final.tables]
    if final.charts:  # likewise: each chart's spec and PNG
        body["charts"] = [chart.payload() for chart in final.charts]
    return body


class _Events:
    """Typed Responses events, numbered in order."""

    def __init__(self) -> None:
        self.sequence = 0

    def __call__(self, kind: str, **data: Any) -> str:
        payload = {"type": kind, "sequence_number": self.sequence, **data}
        self.sequence += 1
        return sse_data(payload, event=kind)


async def response_events(
    events: AsyncGenerator[TurnEvent, None], response_id: str, previous: str | None
) -> AsyncIterator[str]:
    event = _Events()
    message_id = f"msg_{uuid.uuid4().hex}"
    model = ""
    text: list[str] = []
    where = {"item_id": message_id, "output_index": 0, "content_index": 0}
    try:
        async with contextlib.aclosing(events):
            async for step in events:
                if step.type == "router":
                    model = step.model
                    started = response_body(
                        response_id, model, "in_progress", [], None, None, previous
                    )
                    yield event("response.created", response=started) + event(
                        "response.in_progress", response=started
                    )
                elif step.type == "token":
                    opening = ""
                    if not text:
                        opening = event(
                            "response.output_item.added",
                            output_index=0,
                            item=message_item(message_id, "", "in_progress"),
                        ) + event(
                            "response.content_part.added",
                            **where,
                            part={"type": "output_text", "text": "", "annotations": []},
                        )
                    text.append(step.text)
                    yield opening + event(
                        "response.output_text.delta", **where, delta=step.text, logprobs=[]
                    )
                elif step.type == "final":
                    response = finished(step, response_id, previous, message_id)
                    closing = _closing(event, step, message_id, where)
                    yield Last(closing + event("response.completed", response=response))
    except LLMError as exc:
        error = {"code": exc.code, "message": exc.message}
        failed = response_body(response_id, model, "failed", [], None, None, previous, error)
        yield Last(
            event("error", code=exc.code, message=exc.message, param=None)
            + event("response.failed", response=failed)
        )


def _closing(event: _Events, final: Final, message_id: str, where: dict[str, Any]) -> str:
    """The events that close the output items: the text's, then each tool call's."""
    closing = []
    answer = final.text
    if answer:
        part = {"type": "output_text", "text": answer, "annotations": []}
        closing += [
            event("response.output_text.done", **where, text=answer, logprobs=[]),
            event("response.content_part.done", **where, part=part),
            event(
                "response.output_item.done", output_index=0, item=message_item(message_id, answer)
            ),
        ]
    for index, call in enumerate(final.tool_calls, start=1 if answer else 0):
        item = function_call_item(call)
        closing += [
            event(
                "response.output_item.added",
                output_index=index,
                item={**item, "status": "in_progress"},
            ),
            event(
                "response.function_call_arguments.done",
                item_id=item["id"],
                output_index=index,
                arguments=item["arguments"],
            ),
            event("response.output_item.done", output_index=index, item=item),
        ]
    return "".join(closing)


def message_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {
        "type": "message",
        "id": item_id,
        "status": status,
        "role": "assistant",
        "content": content if text or status == "completed" else [],
    }


def function_call_item(call: ClientToolCall, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": f"fc_{call.id}",
        "call_id": call.id,
        "name": call.function.name,
        "arguments": call.function.arguments,
        "status": status,
    }


def response_body(
    response_id: str,
    model: str,
    status: str,
    output: list[dict[str, Any]],
    usage: Usage | None = None,
    agent: dict[str, Any] | None = None,
    previous_response_id: str | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "model": model,
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "previous_response_id": previous_response_id,
        "error": error,
        "incomplete_details": None,
        "usage": None,
    }
    if usage is not None:
        prompt, completion = usage.prompt_tokens, usage.completion_tokens
        body["usage"] = {
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        }
    if agent is not None:
        body["agent"] = agent  # our extension, as on chat completions
    return body
