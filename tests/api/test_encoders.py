"""The wire encoders are pure: the same typed stream, three formats."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

from backend.api.encoders.chat import chat_response, typed_sse
from backend.api.encoders.completions import completion, completion_chunks
from backend.api.encoders.links import linked_metadata
from backend.api.encoders.responses import response_events
from backend.core.events import (
    AnswerDelta,
    Chart,
    Citation,
    Code,
    Final,
    Finish,
    Plot,
    Routed,
    Table,
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
    body = "".join([frame async for frame in typed_sse(stream(turn()), "sales")])
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


PLOT = Plot(path="outputs/plot_1.png")
CHART = Chart(
    run_id="r1", library="plotly", spec_path="outputs/chart_1.plotly.json",
    png_path="outputs/chart_1.png",
)  # fmt: skip
TABLE = Table(
    run_id="r1", table_id="t" * 32, name="totals", source="expression", rows=2, columns=[],
    preview=[],
)  # fmt: skip
FILES = "/api/sessions/sales/files/"
URLS = {
    "plot": {"url": FILES + "outputs/plot_1.png"},
    "chart": {"spec_url": FILES + "outputs/chart_1.plotly.json",
              "png_url": FILES + "outputs/chart_1.png"},
    "table": {"url": "/api/sessions/sales/tables/" + "t" * 32},
}  # fmt: skip


def shown_turn() -> list[TurnEvent]:
    *steps, final = turn()
    assert isinstance(final, Final)
    final = final.model_copy(update={"tables": [TABLE], "charts": [CHART]})
    return [*steps[:2], PLOT, CHART, TABLE, *steps[2:], final]


async def test_every_format_links_what_runs_showed_to_the_clients_session_id() -> None:
    """Core names a plot, a chart and a table by path and id; each format adds the URLs
    that serve them, with the client's session id (never the owner-namespaced key)."""
    body = "".join([frame async for frame in typed_sse(stream(shown_turn()), "sales")])
    sent = {kind: data for kind, data in frames(body)}
    for kind, urls in URLS.items():
        assert urls.items() <= sent[kind].items(), (kind, sent[kind])

    chunks = "".join([frame async for frame in completion_chunks(stream(shown_turn()), False)])
    steps = [
        c["agent_event"] for _, c in frames(chunks) if isinstance(c, dict) and "agent_event" in c
    ]
    for step in steps:
        assert URLS.get(step["type"], {}).items() <= step.items(), step
    final = shown_turn()[-1]
    assert isinstance(final, Final)
    metadata = completion(final)["metadata"]
    assert URLS["table"].items() <= metadata["tables"][0].items()
    assert URLS["chart"].items() <= metadata["charts"][0].items()

    answer = chat_response(final)
    assert answer.tables[0].url == URLS["table"]["url"]
    assert answer.charts[0].png_url == URLS["chart"]["png_url"]

    odd = {"type": "plot", "url": "/kept"}  # stored without a path: sent as it was kept
    stored = {"steps": [PLOT.payload(), TABLE.payload(), {"type": "code", "code": "x"}, odd]}
    read_back = linked_metadata(stored, "sales")["steps"]
    assert URLS["plot"].items() <= read_back[0].items()
    assert URLS["table"].items() <= read_back[1].items()
    assert read_back[2:] == [{"type": "code", "code": "x"}, odd]
