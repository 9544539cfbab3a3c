"""OpenAI's `code_interpreter` tool on `/v1/responses`: the request, and the runs as call items.

Every item and event is read back with the official SDK's types, and a stream is
fed to the SDK's own accumulator, which refuses items whose ids or indexes change.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import httpx2
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter, ValidationError

from backend.api.encoders.code_interpreter import CodeInterpreterOutput
from backend.api.encoders.responses import finished, response_events
from backend.core.events import (
    AnswerDelta,
    Citation,
    Code,
    Execution,
    Final,
    Routed,
    StepEvent,
    TurnEvent,
    TurnSummary,
    Usage,
)
from backend.models.responses import CodeInterpreterTool, ResponseRequest

SUMMARY = TurnSummary(
    agent_type="react", route_reason="the question needs code", session_id="sales",
    conversation_id="c" * 32, tool_calls=[], code=[], files=[], iterations=2, llm_calls=3,
)  # fmt: skip
TEXT = "The total is 410; see plot.png, and the rows are in outputs/table.csv."
CITED = Citation(text="410", start=13, end=16, kind="computed", run_id="r2", code="print(410)")
FINAL = Final(
    text=TEXT, model="m", summary=SUMMARY, citations=[CITED], finish_reason="stop",
    usage=Usage(prompt_tokens=7, completion_tokens=5),
)  # fmt: skip
FAILING = "print(total)"
WORKING = "total = 410\nprint(total)"
STEPS: list[StepEvent] = [
    Code(tool="python_coder", attempt=1, code=FAILING),
    Execution(
        tool="python_coder", attempt=1, run_id="r1", ok=False, stdout="started\n",
        error="NameError: name 'total' is not defined", files=[],
    ),
    Code(tool="python_coder", attempt=2, code=WORKING),
    Execution(
        tool="python_coder", attempt=2, run_id="r2", ok=True, stdout="410\n",
        error=None,
        files=["outputs/table.csv", "outputs/.cache/x.png", "outputs/plot.png", ".hidden.png"],
    ),
]  # fmt: skip
RESPONSE_ID = "resp_" + "c" * 32 + "0" * 16
EVENTS = TypeAdapter[Any](ResponseStreamEvent)


def container(include_outputs: bool = False) -> CodeInterpreterOutput:
    return CodeInterpreterOutput(
        container_id="cntr_sales",
        file_id=lambda path: "cfile_" + path.replace("/", "_").replace(".", "_"),
        file_url=lambda path: f"https://example.test/v1/containers/cntr_sales/files/{path}",
        include_outputs=include_outputs,
    )


def sdk_response(body: dict[str, Any]) -> Response:
    return Response.model_validate(json.loads(json.dumps(body)))


async def stream(events: Sequence[TurnEvent]) -> AsyncGenerator[TurnEvent, None]:
    for event in events:
        yield event


ANSWER = [AnswerDelta(text=TEXT[:20]), AnswerDelta(text=TEXT[20:])]


def turn(*middle: TurnEvent) -> list[TurnEvent]:
    return [Routed(agent_type="react", reason="code", model="m", opening=SUMMARY), *middle, FINAL]


async def sent(
    events: Sequence[TurnEvent], output: CodeInterpreterOutput | None
) -> list[dict[str, Any]]:
    """The stream's events, each checked against the SDK's types and accumulator."""
    body = "".join(
        [frame async for frame in response_events(stream(events), RESPONSE_ID, None, output)]
    )
    payloads = [json.loads(frame.split("data: ", 1)[1]) for frame in body.strip().split("\n\n")]
    for payload in payloads:
        EVENTS.validate_python(payload)
    await sdk_stream(body)
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    return payloads


async def sdk_stream(body: str) -> None:
    """Read `body` with the SDK's `responses.stream()`, whose accumulator raises on an item
    whose id or index changes."""
    reply = httpx2.Response(200, headers={"content-type": "text/event-stream"}, text=body)
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda request: reply))
    sdk = openai.AsyncOpenAI(
        api_key="unused", base_url="http://sdk.test/v1", http_client=http, max_retries=0
    )
    async with sdk, sdk.responses.stream(model="m", input="q") as events:
        async for _ in events:
            pass


def test_each_run_is_a_call_before_the_message_paired_with_its_code() -> None:
    response = sdk_response(
        finished(FINAL, RESPONSE_ID, None, steps=STEPS, code_interpreter=container())
    )
    first, second, message = response.output
    assert first.type == second.type == "code_interpreter_call" and message.type == "message"
    assert (first.code, first.status) == (FAILING, "failed")
    assert (second.code, second.status) == (WORKING, "completed")
    assert first.container_id == second.container_id == "cntr_sales"
    assert first.outputs is None and second.outputs is None  # not asked for with `include`
    assert first.id.startswith("ci_") and len({first.id, second.id, message.id}) == 3
    again = finished(FINAL, RESPONSE_ID, None, steps=STEPS, code_interpreter=container())
    assert [item["id"] for item in again["output"][:2]] == [first.id, second.id]
    assert response.output_text == TEXT


def test_include_adds_the_logs_and_the_images_of_each_run() -> None:
    body = finished(FINAL, RESPONSE_ID, None, steps=STEPS, code_interpreter=container(True))
    failed, worked, _ = sdk_response(body).output
    assert failed.type == worked.type == "code_interpreter_call"
    assert [o.model_dump() for o in failed.outputs or []] == [
        {"type": "logs", "logs": "started\nNameError: name 'total' is not defined"}
    ]
    assert [o.model_dump() for o in worked.outputs or []] == [
        {"type": "logs", "logs": "410\n"},
        {
            "type": "image",
            "url": "https://example.test/v1/containers/cntr_sales/files/outputs/plot.png",
        },
    ]  # the hidden images are the sandbox's own
    quiet = Execution(attempt=1, run_id="r3", ok=True, stdout="", error=None, files=[])
    silent = finished(FINAL, RESPONSE_ID, None, steps=[quiet], code_interpreter=container(True))
    assert silent["output"][0]["outputs"] == [] and silent["output"][0]["code"] is None


def test_the_answer_cites_each_written_file_where_it_names_it() -> None:
    rewrite = Execution(attempt=3, run_id="r3", ok=True, stdout="", error=None,
                        files=["outputs/table.csv", "outputs/notes.txt"])  # fmt: skip
    body = finished(FINAL, RESPONSE_ID, None, steps=[*STEPS, rewrite], code_interpreter=container())
    message = sdk_response(body).output[-1]
    assert message.type == "message" and message.content[0].type == "output_text"
    cited = [a.model_dump() for a in message.content[0].annotations]
    assert [(a["filename"], a["start_index"], a["end_index"]) for a in cited] == [
        ("plot.png", TEXT.index("plot.png"), TEXT.index("plot.png") + len("plot.png")),
        ("table.csv", TEXT.index("table.csv"), TEXT.index("table.csv") + len("table.csv")),
        ("notes.txt", len(TEXT), len(TEXT)),  # written, not named: the end of the text
    ]
    assert all(a["type"] == "container_file_citation" for a in cited)
    assert {a["container_id"] for a in cited} == {"cntr_sales"}
    assert cited[1]["file_id"] == "cfile_outputs_table_csv"


def test_a_name_inside_a_longer_name_is_not_a_mention() -> None:
    final = FINAL.model_copy(update={"text": "See myplot.png and plot.pngs; then plot.png."})
    run = Execution(attempt=1, run_id="r1", ok=True, stdout="", error=None, files=["plot.png"])
    body = finished(final, RESPONSE_ID, None, steps=[run], code_interpreter=container())
    (annotation,) = body["output"][-1]["content"][0]["annotations"]
    start = final.text.index("then plot.png") + len("then ")
    assert (annotation["start_index"], annotation["end_index"]) == (start, start + len("plot.png"))


def test_without_the_tool_a_response_is_as_before_and_the_agent_carries_citations() -> None:
    body = finished(FINAL, RESPONSE_ID, None, steps=STEPS)
    response = sdk_response(body)
    (message,) = response.output
    assert message.type == "message" and message.content[0].type == "output_text"
    assert message.content[0].annotations == []
    assert body["agent"]["citations"] == [CITED.model_dump(mode="json")]
    assert body["agent"]["agent_type"] == "react"


CALL_EVENTS = [
    "response.output_item.added",
    "response.code_interpreter_call.in_progress",
    "response.code_interpreter_call_code.delta",
    "response.code_interpreter_call_code.done",
    "response.code_interpreter_call.interpreting",
    "response.code_interpreter_call.completed",
    "response.output_item.done",
]
MESSAGE_EVENTS = [
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.delta",
    "response.output_text.annotation.added",
    "response.output_text.annotation.added",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
]


async def test_streaming_sends_each_call_in_openai_order_then_the_message() -> None:
    events = await sent(turn(*STEPS, *ANSWER), container(True))
    kinds = [e["type"] for e in events]
    assert kinds == [
        "response.created", "response.in_progress", *CALL_EVENTS, *CALL_EVENTS, *MESSAGE_EVENTS,
        "response.completed",
    ]  # fmt: skip
    completed = events[-1]["response"]
    ids = [item["id"] for item in completed["output"]]
    for event in events[2:-1]:
        assert ids[event["output_index"]] == event.get("item_id", event.get("item", {}).get("id"))
    added = events[2]["item"]
    assert (added["status"], added["code"], added["outputs"]) == ("in_progress", "", None)
    assert events[4]["delta"] == FAILING and events[5]["code"] == FAILING
    assert events[8]["item"] == completed["output"][0]
    assert events[15]["item"] == completed["output"][1]
    message_done = events[-2]["item"]
    assert message_done == completed["output"][2]


async def test_the_completed_response_is_the_finished_one() -> None:
    events = await sent(turn(*STEPS, *ANSWER), container())
    completed = events[-1]["response"]
    message_id = completed["output"][-1]["id"]
    whole = finished(
        FINAL, RESPONSE_ID, None, message_id, steps=STEPS, code_interpreter=container()
    )
    assert {**completed, "created_at": 0} == {**whole, "created_at": 0}


async def test_annotations_are_announced_before_the_text_is_done() -> None:
    events = await sent(turn(*STEPS, *ANSWER), container())
    announced = [e for e in events if e["type"] == "response.output_text.annotation.added"]
    message = events[-1]["response"]["output"][-1]
    assert [e["annotation"] for e in announced] == message["content"][0]["annotations"]
    assert [e["annotation_index"] for e in announced] == [0, 1]
    assert {(e["item_id"], e["output_index"], e["content_index"]) for e in announced} == {
        (message["id"], 2, 0)
    }
    done = next(e for e in events if e["type"] == "response.output_text.done")
    assert done["sequence_number"] > announced[-1]["sequence_number"] and done["text"] == TEXT


async def test_a_run_without_code_is_one_call_with_no_code() -> None:
    run = Execution(tool="rag_retrieval", attempt=1, run_id="r1", ok=True, stdout="3 passages",
                    error=None, files=[])  # fmt: skip
    events = await sent(turn(run, *ANSWER), container())
    kinds = [e["type"] for e in events]
    assert kinds[2:7] == [
        "response.output_item.added",
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "response.output_item.done",
    ]
    assert events[6]["item"]["code"] is None and events[6]["item"]["status"] == "completed"


async def test_text_before_a_call_keeps_the_message_first() -> None:
    events = await sent(turn(ANSWER[0], *STEPS[:2], ANSWER[1]), container())
    completed = events[-1]["response"]
    assert [item["type"] for item in completed["output"]] == ["message", "code_interpreter_call"]
    call = next(e for e in events if e["type"] == "response.code_interpreter_call.completed")
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert call["output_index"] == 1 and {d["output_index"] for d in deltas} == {0}


async def test_code_that_never_ran_is_an_incomplete_call() -> None:
    events = await sent(turn(STEPS[0], *ANSWER), container())
    done = [e for e in events if e["type"] == "response.output_item.done"]
    assert done[0]["item"]["status"] == "incomplete" and done[0]["item"]["code"] == FAILING
    assert "response.code_interpreter_call.completed" not in [e["type"] for e in events]
    assert events[-1]["response"]["output"][0] == done[0]["item"]


async def test_code_replaced_before_it_ran_is_incomplete_and_the_next_gets_the_run() -> None:
    events = await sent(turn(STEPS[0], STEPS[2], STEPS[3], *ANSWER), container())
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert [(item["code"], item["status"]) for item in done[:2]] == [
        (FAILING, "incomplete"),
        (WORKING, "completed"),
    ]
    assert events[-1]["response"]["output"][:2] == done[:2]


async def test_without_the_tool_runs_are_not_sent_and_the_message_is_first() -> None:
    events = await sent(turn(*STEPS, *ANSWER), None)
    kinds = [e["type"] for e in events]
    assert not [k for k in kinds if "code_interpreter" in k or "annotation" in k]
    assert {e["output_index"] for e in events if "output_index" in e} == {0}
    assert [item["type"] for item in events[-1]["response"]["output"]] == ["message"]


async def test_an_answer_that_was_not_streamed_still_opens_its_message() -> None:
    events = await sent(turn(*STEPS), container())
    opened = [e for e in events if e["type"] == "response.output_item.added"]
    assert opened[-1]["item"]["type"] == "message" and opened[-1]["output_index"] == 2


# The request.


def request(**fields: Any) -> ResponseRequest:
    return ResponseRequest.model_validate({"model": "m", "input": "hi", **fields})


WEATHER = {"type": "function", "name": "get_weather", "parameters": {"type": "object"}}


def test_the_code_interpreter_takes_a_container_id_or_an_auto_container() -> None:
    named = request(tools=[{"type": "code_interpreter", "container": "cntr_sales"}])
    assert named.code_interpreter == CodeInterpreterTool(
        type="code_interpreter", container="cntr_sales"
    )
    assert named.client_tools is None and named.tool_conflict() is None
    auto = request(
        tools=[{"type": "code_interpreter",
                "container": {"type": "auto", "file_ids": ["file-1"], "memory_limit": "4g"}}],
        include=["code_interpreter_call.outputs", "reasoning.encrypted_content"],
    )  # fmt: skip
    assert auto.code_interpreter is not None and not isinstance(
        auto.code_interpreter.container, str
    )
    assert auto.code_interpreter.container.file_ids == ["file-1"]
    assert auto.include_code_interpreter_outputs
    assert not request(include=["web_search_call.results"]).include_code_interpreter_outputs
    assert request(tools=[WEATHER]).code_interpreter is None


def interpreter(container: Any) -> dict[str, Any]:
    return {"tools": [{"type": "code_interpreter", "container": container}]}


@pytest.mark.parametrize(
    "fields",
    [
        {"include": ["code_interpreter_call.everything"]},
        interpreter({"type": "auto", "memory_limit": "2g"}),
        interpreter({"type": "auto", "file_ids": ["f"] * 51}),
        interpreter({"type": "auto", "file_ids": ["../secret"]}),
        interpreter({"type": "auto", "file_ids": ["f" * 129]}),
        interpreter({"type": "manual"}),
        interpreter("../other"),
        interpreter("c" * 129),
        {"tools": [{"type": "code_interpreter"}]},
    ],
)
def test_malformed_code_interpreter_requests_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        request(**fields)


def test_function_tools_still_reach_the_client_tools() -> None:
    body = request(tools=[WEATHER], tool_choice="required")
    assert body.client_tools == (
        [
            {
                "type": "function",
                "function": {"name": "get_weather", "parameters": {"type": "object"}},
            }
        ],
        "required",
    )


def test_mixed_or_repeated_code_interpreters_are_a_conflict() -> None:
    interpreter = {"type": "code_interpreter", "container": "cntr_sales"}
    mixed = request(tools=[interpreter, WEATHER])
    assert (
        mixed.tool_conflict() == "The code_interpreter tool cannot be combined with function tools."
    )
    twice = request(tools=[interpreter, interpreter])
    assert twice.tool_conflict() == "Only one code_interpreter tool may be given."
    assert request(tools=[WEATHER, WEATHER]).tool_conflict() is None
    assert request().tool_conflict() is None
