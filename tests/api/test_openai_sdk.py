"""The official `openai` SDK against the real server, unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from pydantic import BaseModel

from tests.conftest import scripted_server
from tests.support.live_server import LiveServer

REPLIES = [
    {"when": "capital", "content": "Paris is the capital of France.", "repeat": True},
    {"when": "count", "content": "One two three four.", "repeat": True},
    {"when": "largest city", "content": '{"city": "Paris", "population": 2100000}', "repeat": True},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("sdk")
    with scripted_server(root, REPLIES, MAX_REQUEST_SIZE_MB="0.5") as live:
        yield live


@pytest.fixture(scope="module")
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)


def test_models_list(client: openai.OpenAI) -> None:
    models = client.models.list()
    assert [m.id for m in models.data] == ["scripted"]
    assert models.data[0].owned_by == "scripted"


def test_non_streaming_completion(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "What is the capital of France?"}]
    )
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].message.content == "Paris is the capital of France."
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None and completion.usage.completion_tokens == 6
    # Our extension has a field of its own; OpenAI's `metadata` is left to OpenAI's meaning.
    agent = completion.agent  # type: ignore[attr-defined]
    assert agent["agent_type"] == "chat"
    assert agent["session_id"] and agent["conversation_id"]
    assert completion.metadata is None


def test_streaming_completion_chunk_order(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "count to four"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    contents = [c.choices[0].delta.content for c in chunks[1:-2]]
    assert contents == ["One", " two", " three", " four."]
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 4
    assert len({c.id for c in chunks}) == 1


def test_stream_ends_with_done_on_the_wire(server: LiveServer) -> None:
    body = {"model": "scripted", "stream": True, "messages": [{"role": "user", "content": "count"}]}
    with (
        server.client() as http,
        http.stream("POST", "/v1/chat/completions", json=body) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]"
    payloads = [json.loads(line[6:]) for line in events[:-1]]
    assert all(p["object"] == "chat.completion.chunk" for p in payloads)
    assert payloads[0]["agent"]["agent_type"] == "chat" and "metadata" not in payloads[0]


def test_unknown_model_is_not_found(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as error:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert error.value.code == "model_not_found"
    assert "gpt-4o" in error.value.message


def test_bad_token_is_an_authentication_error(server: LiveServer) -> None:
    bad = openai.OpenAI(base_url=f"{server.url}/v1", api_key="not-a-token", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as error:
        bad.models.list()
    assert error.value.status_code == 401
    assert error.value.code == "invalid_api_key"


def test_oversize_body_is_refused_with_413(client: openai.OpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as error:
        client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "x" * 600_000}]
        )
    assert error.value.status_code == 413
    assert error.value.code == "request_too_large"


def test_chunked_oversize_body_is_refused_with_413(server: LiveServer) -> None:
    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit must count bytes
        yield b'{"model": "scripted", "messages": [{"role": "user", "content": "'
        for _ in range(64):
            yield b"x" * 16_384
        yield b'"}]}'

    with server.client() as http:
        response = http.post(
            "/v1/chat/completions", content=chunks(), headers={"content-type": "application/json"}
        )
        assert response.status_code == 413
        assert response.json()["error"]["code"] == "request_too_large"
        assert http.get("/v1/models").status_code == 200


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"model": "scripted", "messages": "hi"}', "messages"),
        (b'{"model": "scripted", "messages": []}', "messages"),
        (b'{"model": "scripted", "messages": [{"role": "tool", "content": "x"}]}', "tool_call"),
        (b'{"model": "scripted", "messages": [{"role": "wizard", "content": "x"}]}', "role"),
        (b'{"model": "scripted", "n": 2, "messages": [{"role": "user", "content": "x"}]}', "n"),
        (b'{"model": "scripted", "temperature": "hot", "messages": []}', "temperature"),
        (b'{"model": "scripted", "messages": [{"role": "user", "content": "\\udc80"}]}', "nicode"),
        (b'{"model": "\\ud800", "messages": [{"role": "user", "content": "hi"}]}', "nicode"),
    ],
)
def test_malformed_requests_get_openai_shaped_400(
    server: LiveServer, body: bytes, fragment: str
) -> None:
    with server.client() as http:
        response = http.post(
            "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
        )
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error"
    assert fragment in error["message"]


def test_missing_and_expired_tokens_are_401(server: LiveServer) -> None:
    from backend.core.security import create_access_token

    key = (Path(server.env["DATA_DIR"]) / "secret_key").read_text()
    expired = create_access_token(1, "unused", key, expires_hours=-1)
    for headers in ({}, {"Authorization": f"Bearer {expired}"}):
        response = httpx.get(f"{server.url}/v1/models", headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "authentication_error"
        assert response.headers["www-authenticate"] == "Bearer"


def test_unknown_route_and_wrong_method_are_clean(server: LiveServer) -> None:
    with server.client() as http:
        assert http.get("/v1/nothing").json()["error"]["message"] == "Not Found"
        response = http.get("/v1/chat/completions")
    assert response.status_code == 405
    assert "error" in response.json()


class City(BaseModel):
    city: str
    population: int


def test_parse_with_a_pydantic_model_is_answered_by_plain_chat(client: openai.OpenAI) -> None:
    completion = client.chat.completions.parse(
        model="scripted",
        messages=[{"role": "user", "content": "The largest city of France, with its population?"}],
        response_format=City,
        extra_body={"agent_type": "auto"},
    )
    assert completion.choices[0].message.parsed == City(city="Paris", population=2_100_000)
    agent = completion.agent  # type: ignore[attr-defined]
    assert (
        agent["agent_type"] == "chat"
        and agent["route_reason"] == "the request sets response_format"
    )


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"logprobs": True}, "logprobs"),
        ({"logit_bias": {"50256": -100}}, "logit_bias"),
        ({"extra_body": {"frobnicate": 1}}, "frobnicate"),
    ],
)
def test_a_parameter_the_server_cannot_honour_is_a_400_naming_it(
    client: openai.OpenAI, extra: dict[str, object], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "capital?"}], **extra
        )
    assert error.value.param == param
    assert error.value.code == "unsupported_parameter"
    assert f"'{param}'" in error.value.message


def test_informational_and_supported_parameters_are_accepted(client: openai.OpenAI) -> None:
    completion = client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "capital?"}],
        user="analyst-7",
        seed=7,
        presence_penalty=0.5,
        frequency_penalty=0.5,
        logprobs=False,
        response_format={"type": "text"},
    )
    assert completion.choices[0].message.content == "Paris is the capital of France."


def test_a_response_format_on_an_agent_is_refused(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as error:
        client.chat.completions.create(
            model="scripted",
            messages=[{"role": "user", "content": "capital?"}],
            response_format={"type": "json_object"},
            extra_body={"agent_type": "react"},
        )
    assert error.value.param == "response_format"


def test_embeddings_without_an_embedding_backend_say_how_to_get_one(
    client: openai.OpenAI,
) -> None:
    with pytest.raises(openai.BadRequestError) as error:
        client.embeddings.create(model="bge-m3", input="hello")
    assert "Embeddings need Ollama or an OpenAI-compatible upstream" in error.value.message
