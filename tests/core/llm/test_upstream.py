"""The lean path: wire formats, a dropped pooled connection, an answer cut short."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from backend.llm.upstream import (
    RETRIES,
    Upstream,
    UpstreamError,
    ollama_messages,
    openai_messages,
    openai_stream,
)

HISTORY = [
    SystemMessage("Be brief."),
    HumanMessage("Weather in Paris?"),
    AIMessage("", tool_calls=[{"id": "call_1", "name": "get_weather", "args": {"city": "Paris"}}]),
    ToolMessage("18 C", tool_call_id="call_1"),
    AIMessage("It is 18 C."),
]


def test_openai_messages_carry_calls_as_json_text_and_results_by_call_id() -> None:
    assert openai_messages(HISTORY) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "content": "18 C", "tool_call_id": "call_1"},
        {"role": "assistant", "content": "It is 18 C."},
    ]


def test_ollama_messages_carry_calls_as_objects_and_results_by_tool_name() -> None:
    wire = ollama_messages(HISTORY)
    assert wire[2] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
    }
    assert wire[3] == {"role": "tool", "content": "18 C", "tool_name": "get_weather"}
    assert [m["role"] for m in wire] == ["system", "user", "assistant", "tool", "assistant"]


def _upstream(handler: Callable[[httpx.Request], httpx.Response]) -> Upstream:
    return Upstream(
        "http://upstream.test/v1", httpx.Timeout(5), transport=httpx.MockTransport(handler)
    )


ANSWER = (
    'data: {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": null}]}\n\n'
    'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n'
    "data: [DONE]\n\n"
)


async def test_a_connection_dropped_before_any_answer_is_tried_once_more() -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(json.loads(request.content)["model"])
        if len(calls) == 1:  # a pooled connection the server had closed
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return httpx.Response(200, text=ANSWER, headers={"content-type": "text/event-stream"})

    stream = openai_stream(_upstream(handler), "m")
    events = [event async for event in stream([HumanMessage("hi")], {})]
    assert calls == ["m", "m"]
    assert [e.type for e in events] == ["accepted", "token", "finish"]
    assert events[1].payload() == {"type": "token", "text": "Hi"}
    assert events[2].payload() == {"type": "finish", "reason": "stop"}


async def test_a_connection_dropped_every_time_is_the_callers_error_after_the_retries() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.ReadError("connection reset")

    stream = openai_stream(_upstream(handler), "m")
    with pytest.raises(httpx.ReadError):
        _ = [event async for event in stream([HumanMessage("hi")], {})]
    assert calls == 1 + RETRIES


async def test_a_refused_connection_is_retried_after_a_back_off() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls < 3:  # the upstream is restarting
            raise httpx.ConnectError("connection refused")
        return httpx.Response(200, text=ANSWER, headers={"content-type": "text/event-stream"})

    events = [e async for e in openai_stream(_upstream(handler), "m")([HumanMessage("hi")], {})]
    assert calls == 3 and [e.type for e in events] == ["accepted", "token", "finish"]


async def test_a_429_asking_for_a_long_wait_is_not_held() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(
            429, json={"error": {"message": "quota"}}, headers={"Retry-After": "3600"}
        )

    with pytest.raises(UpstreamError) as raised:
        _ = [e async for e in openai_stream(_upstream(handler), "m")([HumanMessage("hi")], {})]
    assert raised.value.status_code == 429 and calls == 1


async def test_an_answer_cut_before_its_end_is_an_error() -> None:
    cut = ANSWER.split('data: {"choices": [{"index": 0, "delta": {}')[0]

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=cut, headers={"content-type": "text/event-stream"})

    stream = openai_stream(_upstream(handler), "m")
    with pytest.raises(UpstreamError, match="ended before the answer did"):
        _ = [event async for event in stream([HumanMessage("hi")], {})]
