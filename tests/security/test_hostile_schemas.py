"""Hostile structured-output schemas on the embedded model: a 400 each, and the server lives.

The embedded model turns a schema into a llama.cpp grammar inside the API's process;
a `maxLength: 100000000` used to take the whole server down. Every way a schema comes
in is tried: chat completions' `response_format`, the Responses API's `text.format`,
and a client tool's `parameters` (a required call is decoded under them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from backend.llm.embedded import EmbeddedChatModel, shipped_model_path
from backend.llm.errors import LLMError
from tests.conftest import ADMIN_PASSWORD
from tests.support.live_server import LiveServer

MODEL = "smollm2-135m-instruct"


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties)}


def _nested(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = _object(inner=schema)
    return schema


HOSTILE = {
    "huge maxLength": _object(a={"type": "string", "maxLength": 100_000_000}),
    "huge minLength": _object(a={"type": "string", "minLength": 100_000_000}),
    "huge maxItems": _object(a={"type": "array", "items": {"type": "integer"}, "maxItems": 10**8}),
    "huge repetition in a pattern": _object(a={"type": "string", "pattern": "^[a-z]{0,99999999}$"}),
    "deep nesting": _nested(200),
    "huge enum": _object(a={"enum": [f"v{i}" for i in range(5000)]}),
    "huge schema": {**_object(a={"type": "string"}), "description": "x" * 200_000},
}


QUESTION = {"model": MODEL, "messages": [{"role": "user", "content": "JSON, please."}]}
Way = Callable[[dict[str, Any]], tuple[str, dict[str, Any], str]]  # path, body, param


def as_response_format(schema: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    spec = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    body = {**QUESTION, "response_format": spec, "max_tokens": 16}
    return "/v1/chat/completions", body, "response_format.json_schema.schema"


def as_text_format(schema: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    spec = {"type": "json_schema", "name": "x", "schema": schema}
    body = {"model": MODEL, "input": "JSON, please.", "text": {"format": spec}}
    return "/v1/responses", {**body, "max_output_tokens": 16}, "text.format.schema"


def as_tool_parameters(schema: dict[str, Any]) -> tuple[str, dict[str, Any], str]:
    tool = {"type": "function", "function": {"name": "f", "parameters": schema}}
    body = {**QUESTION, "tools": [tool], "tool_choice": "required", "max_tokens": 16}
    return "/v1/chat/completions", body, "tools.0.function.parameters"


@pytest.fixture(autouse=True)
def server_stays_healthy() -> None:
    """These tests use a server of their own, not the red-team suite's shared one."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = LiveServer(
        tmp_path_factory.mktemp("hostile") / "data",
        LLM_BACKEND="embedded",
        ADMIN_PASSWORD=ADMIN_PASSWORD,
        EMBEDDED_MAX_TOKENS="48",
    )
    live.start()
    try:
        yield live
    finally:
        live.stop()


@pytest.mark.parametrize("way", [as_response_format, as_text_format, as_tool_parameters])
@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_schema_is_a_400_and_the_server_stays_up(
    server: LiveServer, name: str, way: Way
) -> None:
    path, body, param = way(HOSTILE[name])
    with server.client() as http:
        answer = http.post(path, json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error", error
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200


class City(BaseModel):
    city: str
    population: int


def test_a_normal_structured_request_still_answers(server: LiveServer) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    parsed = client.chat.completions.parse(
        model=MODEL,
        messages=[{"role": "user", "content": "The largest city of France and its population?"}],
        response_format=City,
        max_tokens=60,
    )
    assert isinstance(parsed.choices[0].message.parsed, City)


def test_the_embedded_model_refuses_to_build_an_unbounded_grammar_itself() -> None:
    # Defence in depth: a caller that skipped the API's checks gets a 400 error, and this
    # process (which holds the model) goes on.
    model = EmbeddedChatModel(model_path=str(shipped_model_path()), n_ctx=512)
    schema = HOSTILE["huge maxLength"]
    with pytest.raises(LLMError) as refused:
        model.invoke("Hi", response_format={"type": "json_object", "schema": schema})
    assert refused.value.status_code == 400 and "maxLength" in refused.value.message
    reply = model.invoke(
        "Hi",
        max_tokens=24,
        response_format={"type": "json_object", "schema": _object(a={"type": "integer"})},
    )
    assert '"a"' in str(reply.content)
