"""Finding a tool call in what a model wrote: bare, fenced, after prose or reasoning."""

from __future__ import annotations

import json

import pytest

from backend.core.agents.client_tools import ClientTools

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
TIME = {"type": "function", "function": {"name": "get_time"}}
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


@pytest.mark.parametrize(
    "reply",
    [
        CALL,
        f"```json\n{CALL}\n```",
        f"Let me check the weather.\n{CALL}\nOne moment.",
        f"<think>The user wants {{the weather}}; I call a tool.</think>\n{CALL}",
        '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}',  # arguments as text
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',  # another common spelling
    ],
)
def test_a_call_is_found_however_it_is_written(reply: str) -> None:
    call = ClientTools([WEATHER, TIME]).parse(reply)
    assert call is not None and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert call.id.startswith("call_")


@pytest.mark.parametrize(
    "reply",
    [
        "It is probably sunny in Paris.",
        '{"name": "launch_rocket", "arguments": {}}',  # not one of the tools
        '{"name": "get_weather", "arguments": [1, 2]}',  # arguments must be an object
        '{"name": "get_weather", "arguments": {"city": "Par',  # cut off
    ],
)
def test_no_call_is_invented(reply: str) -> None:
    assert ClientTools([WEATHER, TIME]).parse(reply) is None


def test_a_named_choice_offers_only_that_tool() -> None:
    tools = ClientTools([WEATHER, TIME], {"type": "function", "function": {"name": "get_time"}})
    assert tools.required and [t["function"]["name"] for t in tools.offered] == ["get_time"]
    assert tools.parse(CALL) is None
    assert tools.call_schema()["properties"]["name"] == {"type": "string", "enum": ["get_time"]}
    assert "anyOf" in ClientTools([WEATHER, TIME], "required").call_schema()
