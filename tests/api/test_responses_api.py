"""`POST /v1/responses` through the official SDK: text, streaming, continuing, tools."""

from __future__ import annotations

import json
from collections.abc import Iterator

import openai
import pytest

from tests.conftest import scripted_server
from tests.support.live_server import LiveServer

REPLIES = [
    {"when": "capital of France", "content": "Paris is the capital of France.", "repeat": True},
    {"when": "of Italy", "content": "Rome, as you asked after France.", "repeat": True},
    {
        "when": "weather in Paris",
        "content": '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    },
    {"when": "Tool result", "content": "It is 18 °C in Paris.", "repeat": True},
    {"when": "pirate", "content": "Arr, hello!", "repeat": True},
]
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(tmp_path_factory.mktemp("responses"), REPLIES) as live:
        yield live


@pytest.fixture(scope="module")
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)


def test_a_string_input_gets_a_text_response(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="scripted", input="What is the capital of France?", instructions="Be brief."
    )
    assert response.id.startswith("resp_") and response.status == "completed"
    assert response.output_text == "Paris is the capital of France."
    assert response.usage is not None and response.usage.output_tokens == 6
    assert response.agent["agent_type"] == "chat"  # type: ignore[attr-defined]


def test_streaming_sends_the_standard_events(client: openai.OpenAI) -> None:
    with client.responses.stream(model="scripted", input="Talk like a pirate") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert "response.output_text.delta" in kinds and kinds[-1] == "response.completed"
    assert kinds.index("response.output_item.added") < kinds.index("response.output_text.delta")
    assert final.output_text == "Arr, hello!"
    deltas = list(client.responses.create(model="scripted", input="a pirate!", stream=True))
    numbers = [event.sequence_number for event in deltas]
    assert numbers == list(range(len(deltas)))


def test_previous_response_id_continues_the_conversation(
    client: openai.OpenAI, server: LiveServer
) -> None:
    first = client.responses.create(model="scripted", input="The capital of France?")
    second = client.responses.create(
        model="scripted", input="And of Italy?", previous_response_id=first.id
    )
    assert second.output_text == "Rome, as you asked after France."
    conversation = second.agent["conversation_id"]  # type: ignore[attr-defined]
    assert conversation == first.agent["conversation_id"]  # type: ignore[attr-defined]
    with server.client() as http:
        stored = http.get(f"/api/conversations/{conversation}").json()["messages"]
    assert [m["content"] for m in stored] == [
        "The capital of France?",
        "Paris is the capital of France.",
        "And of Italy?",
        "Rome, as you asked after France.",
    ]
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(model="scripted", input="hi", previous_response_id="resp_nope")
    assert missing.value.param == "previous_response_id"  # type: ignore[attr-defined]


def test_any_earlier_response_continues_as_a_branch(
    client: openai.OpenAI, server: LiveServer
) -> None:
    first = client.responses.create(model="scripted", input="The capital of France?")
    second = client.responses.create(
        model="scripted", input="And of Italy?", previous_response_id=first.id
    )
    third = client.responses.create(
        model="scripted", input="Now like a pirate", previous_response_id=first.id
    )
    assert third.output_text == "Arr, hello!"
    conversation = third.agent["conversation_id"]  # type: ignore[attr-defined]
    with server.client() as http:
        detail = http.get(f"/api/conversations/{conversation}").json()
        # The latest branch skips the second response; the other branch still has it.
        assert [m["content"] for m in detail["messages"]] == [
            "The capital of France?",
            "Paris is the capital of France.",
            "Now like a pirate",
            "Arr, hello!",
        ]
        assert len(detail["branches"]) == 2
        italy = detail["messages"][2]["siblings"][0]
        other = http.get(f"/api/conversations/{conversation}", params={"leaf": italy}).json()
    assert other["messages"][-1]["content"] == second.output_text


def test_function_tools_round_trip(client: openai.OpenAI) -> None:
    first = client.responses.create(
        model="scripted",
        input="What is the weather in Paris?",
        tools=[WEATHER],  # type: ignore[list-item]
    )
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    second = client.responses.create(
        model="scripted",
        input=[
            {"role": "user", "content": "What is the weather in Paris?"},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {"type": "function_call_output", "call_id": call.call_id, "output": '{"c": 18}'},
        ],
        tools=[WEATHER],  # type: ignore[list-item]
    )
    assert second.output_text == "It is 18 °C in Paris."


def test_unsupported_parameters_are_named(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as error:
        client.responses.create(model="scripted", input="hi", reasoning={"effort": "high"})
    assert error.value.param == "reasoning"  # type: ignore[attr-defined]
