"""Issue 41: a live server on stand-in Ollama models gives each model its own profile at
its first use, shows it (`/api/models`, `/api/status`), and takes a different path for
a model that ignores the tool format."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from openai import OpenAI

from tests.conftest import StartServer
from tests.support.live_server import LiveServer, free_port
from tests.support.stand_in_models import StandIn, StandInOllama

MODELS = {
    "wide:latest": StandIn(window=32_768),
    "narrow:latest": StandIn(window=2_048),
    "prose:latest": StandIn(window=32_768, calls_tools=False),
}
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture
def ollama() -> Iterator[StandInOllama]:
    with StandInOllama(free_port(), MODELS) as server:
        yield server


def _models(server: LiveServer) -> dict[str, Any]:
    with server.client() as http:
        listed = http.get("/api/models")
    assert listed.status_code == 200, listed.text
    return {entry["id"]: entry for entry in listed.json()["data"]}


def _ask(server: LiveServer, model: str, **extra: Any) -> Any:
    client = OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    return client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Weather in Paris?"}], **extra
    )


def test_each_model_gets_its_profile_at_first_use_and_its_own_path(
    ollama: StandInOllama, start_server: StartServer
) -> None:
    server = start_server(
        LLM_BACKEND="ollama",
        OLLAMA_HOST=ollama.url,
        OLLAMA_MODEL="wide:latest",
        MODEL_PROBE="true",
    )
    before = _models(server)
    assert list(before) == ["wide:latest", "narrow:latest", "prose:latest"]  # the default first
    assert before["wide:latest"]["default"] is True
    assert all(entry["profile"] is None for entry in before.values())  # listing asks nothing
    assert not ollama.requests

    for model in MODELS:
        assert _ask(server, model, tools=[WEATHER]).choices[0].finish_reason

    after = {name: entry["profile"] for name, entry in _models(server).items()}
    assert after["wide:latest"] == {
        "size": "capable",
        "native_tools": True,
        "long_context": True,
        "context_window": 8_192,  # OLLAMA_NUM_CTX caps what it was trained on
        "source": "probe",
        "probe": {"follows_tools": True, "honours_schema": True},
    }
    assert (after["narrow:latest"]["long_context"], after["narrow:latest"]["context_window"]) == (
        False,
        2_048,
    )
    assert after["prose:latest"]["native_tools"] is False
    with server.client() as http:
        status = http.get("/api/status").json()["llm"]
    assert status["model"] == "wide:latest" and status["profile"] == after["wide:latest"]

    # The client's tools: in the API's own format to a model that calls them, in a prompt
    # (and its JSON call parsed) to one that answers prose instead.
    turns = [
        body for body in ollama.requests if body["messages"][-1]["content"] == "Weather in Paris?"
    ]
    by_model = {body["model"]: body for body in turns}
    assert by_model["wide:latest"].get("tools")
    assert not by_model["prose:latest"].get("tools")
    assert "get_weather" in by_model["prose:latest"]["messages"][0]["content"]


def test_an_operators_word_is_shown_before_any_use(
    ollama: StandInOllama, start_server: StartServer
) -> None:
    server = start_server(
        LLM_BACKEND="ollama",
        OLLAMA_HOST=ollama.url,
        MODEL_PROBE="true",
        MODEL_PROFILES='{"prose:latest": {"size": "small"}}',
    )
    listed = _models(server)
    assert listed["prose:latest"]["profile"]["size"] == "small"
    assert listed["prose:latest"]["profile"]["source"] == "setting"
    assert listed["wide:latest"]["profile"] is None
    assert not ollama.requests
