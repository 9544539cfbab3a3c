"""`/v1/responses`: a turn as OpenAI's Responses API, one response or its typed events.

Streaming sends the standard events, numbered in order: `response.created`, each
output item's opening, progress and closing events, and `response.completed`.
An item's `output_index` is its place in the order the items were opened; with
the code interpreter, a run's call opens when its code arrives, so the calls
normally come before the answer's message.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any

from backend.api.encoders.code_interpreter import Change, CodeCalls, CodeInterpreterOutput
from backend.api.encoders.links import tables_metadata
from backend.api.sse import Last, sse_data
from backend.core.events import ClientToolCall, Code, Execution, Final, StepEvent, TurnEvent, Usage
from backend.llm import LLMError


def finished(
    final: Final,
    response_id: str,
    previous: str | None,
    message_id: str = "",
    *,
    steps: Sequence[StepEvent] = (),
    code_interpreter: CodeInterpreterOutput | None = None,
) -> dict[str, Any]:
    """The whole response of a finished turn. With `code_interpreter`, each run in
    `steps` is a `code_interpreter_call` before the message, which cites their files."""
    calls = CodeCalls.of(steps, response_id, code_interpreter) if code_interpreter else None
    message_id = message_id or f"msg_{uuid.uuid4().hex}"
    return _response(final, response_id, previous, message_id, calls)


def _response(
    final: Final,
    response_id: str,
    previous: str | None,
    message_id: str,
    calls: CodeCalls | None,
    opened: Sequence[str] = (),
) -> dict[str, Any]:
    """The response; the items a stream `opened` keep its order (their output indexes)."""
    items = {call.id: calls.item(call) for call in calls.calls} if calls else {}
    if final.text or not final.tool_calls or message_id in opened:
        cited = calls.citations(final.text) if calls else []
        items[message_id] = message_item(message_id, final.text, annotations=cited)
    output = [items.pop(item_id) for item_id in opened if item_id in items]
    output += list(items.values())
    output += [function_call_item(call) for call in final.tool_calls]
    status = "incomplete" if final.finish_reason == "length" else "completed"
    agent = {**final.summary.model_dump(mode="json"), "citations": final.citations_payload()}
    body = response_body(response_id, final.model, status, output, final.usage, agent, previous)
    return body | tables_metadata(final)  # our extension, as on chat completions' metadata


class _Events:
    """Typed Responses events, numbered in order."""

    def __init__(self) -> None:
        self.sequence = 0

    def __call__(self, kind: str, **data: Any) -> str:
        payload = {"type": kind, "sequence_number": self.sequence, **data}
        self.sequence += 1
        return sse_data(payload, event=kind)


async def response_events(
    events: AsyncGenerator[TurnEvent, None],
    response_id: str,
    previous: str | None,
    code_interpreter: CodeInterpreterOutput | None = None,
) -> AsyncIterator[str]:
    stream = _ResponseStream(response_id, previous, code_interpreter)
    try:
        async with contextlib.aclosing(events):
            async for step in events:
                if step.type == "router":
                    yield stream.started(step.model)
                elif step.type == "token":
                    yield stream.token(step.text)
                elif isinstance(step, Code | Execution) and stream.calls is not None:
                    yield "".join(stream.call(change) for change in stream.calls.add(step))
                elif step.type == "final":
                    yield Last(stream.completed(step))
    except LLMError as exc:
        yield Last(stream.failed(exc))


class _ResponseStream:
    """One response's events, item by item."""

    def __init__(
        self, response_id: str, previous: str | None, code_interpreter: CodeInterpreterOutput | None
    ) -> None:
        self.event = _Events()
        self.response_id = response_id
        self.previous = previous
        self.model = ""
        self.message_id = f"msg_{uuid.uuid4().hex}"
        self.calls = CodeCalls(response_id, code_interpreter) if code_interpreter else None
        self.opened: list[str] = []  # the items' ids, by output index

    def started(self, model: str) -> str:
        self.model = model
        body = response_body(self.response_id, model, "in_progress", [], None, None, self.previous)
        return self.event("response.created", response=body) + self.event(
            "response.in_progress", response=body
        )

    def token(self, text: str) -> str:
        return self._open_message() + self.event(
            "response.output_text.delta", **self._in_message(), delta=text, logprobs=[]
        )

    def call(self, change: Change) -> str:
        """A code interpreter call's events: its opening and code, or its end."""
        assert self.calls is not None
        kind, call = change
        if kind == "added":
            self.opened.append(call.id)
        where = {"item_id": call.id, "output_index": self.opened.index(call.id)}
        item = self.calls.item(call)
        if kind == "done":
            ran = ""  # a call whose code never ran is only done
            if call.run is not None:
                ran = self.event("response.code_interpreter_call.completed", **where)
            return ran + self.event(
                "response.output_item.done", output_index=where["output_index"], item=item
            )
        opening = [
            self.event("response.output_item.added", output_index=where["output_index"], item=item),
            self.event("response.code_interpreter_call.in_progress", **where),
        ]
        if call.code is not None:
            opening += [
                self.event("response.code_interpreter_call_code.delta", **where, delta=call.code),
                self.event("response.code_interpreter_call_code.done", **where, code=call.code),
            ]
        opening.append(self.event("response.code_interpreter_call.interpreting", **where))
        return "".join(opening)

    def completed(self, final: Final) -> str:
        """The closing events: any call left waiting, the message's, each tool call's,
        then the whole response."""
        closing = [self.call(change) for change in self.calls.end()] if self.calls else []
        if final.text or not final.tool_calls or self.message_id in self.opened:
            closing.append(self._open_message() + self._close_message(final.text))
        for index, call in enumerate(final.tool_calls, start=len(self.opened)):
            item = function_call_item(call)
            closing += [
                self.event(
                    "response.output_item.added",
                    output_index=index,
                    item={**item, "status": "in_progress"},
                ),
                self.event(
                    "response.function_call_arguments.done",
                    item_id=item["id"],
                    output_index=index,
                    arguments=item["arguments"],
                ),
                self.event("response.output_item.done", output_index=index, item=item),
            ]
        response = _response(
            final, self.response_id, self.previous, self.message_id, self.calls, self.opened
        )
        return "".join(closing) + self.event("response.completed", response=response)

    def failed(self, exc: LLMError) -> str:
        error = {"code": exc.code, "message": exc.message}
        body = response_body(
            self.response_id, self.model, "failed", [], None, None, self.previous, error
        )
        return self.event("error", code=exc.code, message=exc.message, param=None) + self.event(
            "response.failed", response=body
        )

    def _in_message(self) -> dict[str, Any]:
        index = self.opened.index(self.message_id)
        return {"item_id": self.message_id, "output_index": index, "content_index": 0}

    def _open_message(self) -> str:
        """The message's opening events, the first time only."""
        if self.message_id in self.opened:
            return ""
        self.opened.append(self.message_id)
        index = len(self.opened) - 1
        item = message_item(self.message_id, "", "in_progress")
        part = {"type": "output_text", "text": "", "annotations": []}
        return self.event("response.output_item.added", output_index=index, item=item) + (
            self.event("response.content_part.added", **self._in_message(), part=part)
        )

    def _close_message(self, text: str) -> str:
        """The answer's annotations, then its text, part and item done."""
        where = self._in_message()
        cited = self.calls.citations(text) if self.calls else []
        closing = [
            self.event(
                "response.output_text.annotation.added", **where, annotation_index=n, annotation=a
            )
            for n, a in enumerate(cited)
        ]
        part = {"type": "output_text", "text": text, "annotations": cited}
        item = message_item(self.message_id, text, annotations=cited)
        closing += [
            self.event("response.output_text.done", **where, text=text, logprobs=[]),
            self.event("response.content_part.done", **where, part=part),
            self.event("response.output_item.done", output_index=where["output_index"], item=item),
        ]
        return "".join(closing)


def message_item(
    item_id: str,
    text: str,
    status: str = "completed",
    annotations: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": list(annotations)}]
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
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion,
        }
    if agent is not None:
        body["agent"] = agent  # our extension, as on chat completions
    return body
