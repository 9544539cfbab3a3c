"""The wire encoders are pure: the same typed stream, three formats."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from backend.api.encoders.chat import typed_sse
from backend.api.encoders.completions import completion, completion_chunks
from backend.api.encoders.responses import response_events
from backend.core.events import (
    AnswerDelta,
    Citation,
    Code,
    Final,
    Finish,
    Routed,
    TurnEvent,
    TurnSummary,
    Usage,
)

SUMMARY = TurnSummary(
    agent_type="react", route_reason="the question needs code", session_id="sales",
    conversation_id="c" * 32, tool_calls=[], code=["print(410)"], files=[], iterations=1,
    llm_calls=3,
)  # fmt: skip
CITED = Citation(text="410", start=10, end=13, kind="computed", run_id="r1", code="print(410)")


def turn() -> list[TurnEvent]:
    return [
        Routed(agent_type="react", reason="the question needs code", model="m", opening=SUMMARY),
        Code(tool="python_coder", attempt=1, code="print(410)"),
        AnswerDelta(text="The total is 410."),
        Usage(prompt_tokens=7, completion_tokens=5),
        Finish(reason="stop"),
        Final(
            text="The total is 410.",
            model="m",
            summary=SUMMARY,
            citations=[CITED],
            finish_reason="stop",
            usage=Usage(prompt_tokens=7, completion_tokens=5),
        ),
    ]


async def stream(events: list[TurnEvent]) -> AsyncGenerator[TurnEvent, None]:
    for event in events:
        yield event


def frames(body: str) -> list[tuple[str | None, Any]]:
    found = []
    for frame in body.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        data = lines["data"]
        found.append((lines.get("event"), data if data == "[DONE]" else json.loads(data)))
    return found


async def test_api_chat_sends_what_clients_read_and_sums_the_turn_up_in_final() -> None:
    body = "".join([frame async for frame in typed_sse(stream(turn()))])
    sent = frames(body)
    assert [kind for kind, _ in sent] == ["router", "code", "token", "final", "done"]
    assert sent[0][1] == {"type": "router", "agent_type": "react",
                          "reason": "the question needs code"}  # fmt: skip
    final = sent[3][1]
    assert final["text"] == "The total is 410." and final["session_id"] == "sales"
    assert final["iterations"] == 1 and final["citations"][0]["run_id"] == "r1"


async def test_openai_chunks_carry_steps_in_extension_fields_and_usage_when_asked() -> None:
    body = "".join([frame async for frame in completion_chunks(stream(turn()), True)])
    chunks = [data for _, data in frames(body)]
    assert chunks[-1] == "[DONE]"
    role, step, content, closing, usage = chunks[:-1]
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert role["agent"]["session_id"] == "sales" and role["model"] == "m"
    assert step["choices"][0]["delta"] == {} and step["agent_event"]["type"] == "code"
    assert content["choices"][0]["delta"] == {"content": "The total is 410."}
    assert closing["choices"][0]["finish_reason"] == "stop"
    assert closing["metadata"]["citations"][0]["text"] == "410"
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] == 12
    assert len({c["id"] for c in (role, step, content, closing, usage)}) == 1


async def test_a_finished_turn_is_one_completion_and_plain_chat_has_no_metadata() -> None:
    final = turn()[-1]
    assert isinstance(final, Final)
    body = completion(final)
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "The total is 410."}
    assert body["metadata"]["citations"][0]["kind"] == "computed"
    chat = final.model_copy(update={"summary": SUMMARY.model_copy(update={"agent_type": "chat"})})
    assert "metadata" not in completion(chat)


async def test_responses_events_are_numbered_and_end_with_the_completed_response() -> None:
    body = "".join([f async for f in response_events(stream(turn()), "resp_x", None)])
    sent = [data for _, data in frames(body)]
    kinds = [event["type"] for event in sent]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in kinds and kinds[-1] == "response.completed"
    assert [event["sequence_number"] for event in sent] == list(range(len(sent)))
    done = sent[-1]["response"]
    assert done["output"][0]["content"][0]["text"] == "The total is 410."
    assert done["usage"]["input_tokens"] == 7 and done["agent"]["agent_type"] == "react"
