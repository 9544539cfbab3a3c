"""A Responses tool sent to Chat Completions gets OpenAI's own 400, through the official SDK."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.conftest import scripted_server
from tests.support.live_server import LiveServer

QUESTION: Any = [{"role": "user", "content": "What is 2 + 2?"}]
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("code_interpreter")
    with scripted_server(root, [{"content": "4", "repeat": True}]) as live:
        yield live


@pytest.fixture(scope="module")
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)


@pytest.mark.parametrize(
    "tool",
    [{"type": "code_interpreter"}, {"type": "code_interpreter", "container": {"type": "auto"}}],
)
def test_code_interpreter_is_answered_as_openai_does(
    client: openai.OpenAI, tool: dict[str, Any]
) -> None:
    tools: Any = [tool]
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="scripted", messages=QUESTION, tools=tools)
    assert error.value.status_code == 400
    assert error.value.type == "invalid_request_error"
    assert error.value.param == "tools[0].type"
    assert error.value.code == "invalid_value"
    assert error.value.body == {  # the SDK's message adds "Error code: 400 - "
        "message": "Invalid value: 'code_interpreter'. Supported values are: "
        "'function' and 'custom'.",
        "type": "invalid_request_error",
        "param": "tools[0].type",
        "code": "invalid_value",
    }


def test_the_param_names_the_tool_among_others(client: openai.OpenAI) -> None:
    tools: Any = [WEATHER, {"type": "web_search"}]
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="scripted", messages=QUESTION, tools=tools)
    assert error.value.param == "tools[1].type"
    assert "Invalid value: 'web_search'." in error.value.message


def test_a_custom_tool_is_refused_as_unsupported_here(client: openai.OpenAI) -> None:
    tools: Any = [{"type": "custom", "custom": {"name": "apply_patch"}}]
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(model="scripted", messages=QUESTION, tools=tools)
    assert error.value.param == "tools[0].type"
    assert error.value.code == "unsupported_value"
    assert "'function'" in error.value.message


def test_a_function_tool_beside_the_refusals_is_answered(client: openai.OpenAI) -> None:
    tools: Any = [WEATHER]
    completion = client.chat.completions.create(model="scripted", messages=QUESTION, tools=tools)
    assert completion.choices[0].message.content == "4"
