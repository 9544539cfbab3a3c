"""The client's own tools (OpenAI `tools`): calls come back, results go in, streamed or not."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, SecretStr

from tests.conftest import scripted_server
from tests.support.live_server import LiveServer

CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
REPLIES = [
    # The prompted path: the model answers with a JSON call, in prose or a fence at times.
    {"when": "weather in Paris", "content": CALL, "repeat": True},
    {"when": "fenced weather", "content": f"I will look it up.\n```json\n{CALL}\n```"},
    {"when": "Tool result", "content": "It is 18 °C in Paris.", "repeat": True},
    {"when": "say hello", "content": "Hello there, no tools needed.", "repeat": True},
    {"when": "Rate the film", "content": '{"name": "Review", "arguments": {"stars": 4}}'},
]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(tmp_path_factory.mktemp("tools"), REPLIES) as live:
        yield live


@pytest.fixture(scope="module")
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)


def test_a_full_tool_round_trip(client: openai.OpenAI) -> None:
    messages: list[dict[str, object]] = [
        {"role": "user", "content": "What is the weather in Paris?"}
    ]
    first = client.chat.completions.create(model="scripted", messages=messages, tools=[WEATHER])  # type: ignore[arg-type,list-item]
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert first.agent["route_reason"] == "the request carries its own tools"  # type: ignore[attr-defined]

    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"celsius": 18}'},
    ]
    second = client.chat.completions.create(model="scripted", messages=messages, tools=[WEATHER])  # type: ignore[arg-type]
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "It is 18 °C in Paris."


def test_tool_calls_stream_as_deltas(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="scripted",
            messages=[{"role": "user", "content": "The weather in Paris, streamed?"}],
            tools=[WEATHER],  # type: ignore[list-item]
            tool_choice={"type": "function", "function": {"name": "get_weather"}},
            stream=True,
        )
    )
    deltas = [d for c in chunks if c.choices for d in c.choices[0].delta.tool_calls or []]
    assert len(deltas) == 1 and deltas[0].index == 0 and deltas[0].id
    assert deltas[0].function and deltas[0].function.name == "get_weather"
    assert json.loads(deltas[0].function.arguments or "") == {"city": "Paris"}
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    assert not "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_a_call_in_prose_or_a_fence_is_found_and_prose_stays_prose(
    client: openai.OpenAI,
) -> None:
    fenced = client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "The fenced weather, please"}],
        tools=[WEATHER],  # type: ignore[list-item]
        tool_choice="required",
    )
    assert (fenced.choices[0].message.tool_calls or [])[0].function.name == "get_weather"
    plain = client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "Just say hello"}],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert plain.choices[0].message.content == "Hello there, no tools needed."
    assert plain.choices[0].message.tool_calls is None
    assert plain.choices[0].finish_reason == "stop"


def test_a_model_without_native_tools_reads_earlier_calls_and_results_as_text(
    client: openai.OpenAI,
) -> None:
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}  # fmt: skip
    history = [
        {"role": "user", "content": "weather in Paris"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
    ]
    # Tools offered but not to be called, and no tools at all: the scripted model (which
    # has no native tools) answers the result, which reached it as "Tool result (...)".
    for extra in ({"tools": [WEATHER], "tool_choice": "none"}, {}):
        answer = client.chat.completions.create(
            model="scripted",
            messages=history,
            **extra,  # type: ignore[arg-type]
        )
        assert answer.choices[0].message.content == "It is 18 °C in Paris."
        assert answer.choices[0].finish_reason == "stop"


def test_bad_tool_requests_are_400s(client: openai.OpenAI) -> None:
    question = [{"role": "user", "content": "weather in Paris"}]
    with pytest.raises(openai.BadRequestError) as unknown:
        client.chat.completions.create(
            model="scripted",
            messages=question,  # type: ignore[arg-type]
            tools=[WEATHER],  # type: ignore[list-item]
            tool_choice={"type": "function", "function": {"name": "launch"}},
        )
    with pytest.raises(openai.BadRequestError) as agent:
        client.chat.completions.create(
            model="scripted",
            messages=question,  # type: ignore[arg-type]
            tools=[WEATHER],  # type: ignore[list-item]
            extra_body={"agent_type": "react"},
        )
    assert "'launch', which is not among the tools" in unknown.value.message
    assert agent.value.param == "tools"


class Review(BaseModel):
    stars: int


def test_langchain_bind_tools_and_function_calling_structured_output(server: LiveServer) -> None:
    chat = ChatOpenAI(
        model="scripted", base_url=f"{server.url}/v1", api_key=SecretStr(server.token())
    )

    @tool
    def get_weather(city: str) -> str:
        """The current weather in a city."""
        return "18 °C"

    reply = chat.bind_tools([get_weather]).invoke("What is the weather in Paris?")
    assert [(c["name"], c["args"]) for c in reply.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    structured = chat.with_structured_output(Review, method="function_calling")
    assert structured.invoke("Rate the film, please") == Review(stars=4)
