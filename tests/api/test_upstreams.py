"""Real upstream protocols: an OpenAI-compatible server and Ollama, on loopback.

A server process takes seconds to start, so the tests share one per setting: one on the
`openai` backend, one on it with a 1 s request timeout, one on `ollama`. Each test serves
a fresh stand-in upstream on the port its server points at (tests/support/stand_in_port.py)
and talks to the server as a user of its own (tests/support/shared_server.py). A test
whose upstream is down, or that has a script of its own, has an app of its own in this
process (`start_app`: it only sends requests and reads whole answers); the one whose
Ollama lists other models (the server keeps the list for 5 s) has a server of its own.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import StartApp, StartServer, write_replies
from tests.support.fake_ollama import FakeOllama
from tests.support.live_server import LiveServer, free_port
from tests.support.shared_server import SharedServer, SignedIn, module_server, own_user
from tests.support.stand_in_port import OpenAIStandIn, StandInPort
from tests.support.waiting import wait_for

# What every stand-in Ollama of the shared server lists: the server keeps the list for
# 5 s, so one test's list must not be another's.
OLLAMA_MODELS = ["qwen:latest", "bge-m3:latest"]


@pytest.fixture(scope="module")
def openai_port() -> Iterator[StandInPort]:
    with StandInPort(free_port()) as port:
        yield port


@pytest.fixture(scope="module")
def ollama_port() -> Iterator[StandInPort]:
    with StandInPort(free_port()) as port:
        yield port


@pytest.fixture
def openai_upstream(openai_port: StandInPort) -> Iterator[StandInPort]:
    """The port the `openai` servers call, for the test to serve its stand-in on."""
    yield openai_port
    openai_port.serve(None)


@pytest.fixture
def ollama_upstream(ollama_port: StandInPort) -> Iterator[StandInPort]:
    """The port the `ollama` server calls, for the test to serve its stand-in on."""
    yield ollama_port
    ollama_port.serve(None)


def _openai_env(port: StandInPort) -> dict[str, str]:
    """Our server on the `openai` backend, in front of the stand-in upstream."""
    return {
        "LLM_BACKEND": "openai",
        "OPENAI_BASE_URL": f"{port.base_url}/v1",
        "OPENAI_MODEL": "fake-upstream",
    }


@pytest.fixture(scope="module")
def openai_server(
    tmp_path_factory: pytest.TempPathFactory, openai_port: StandInPort
) -> Iterator[SharedServer]:
    with module_server(tmp_path_factory.mktemp("openai"), **_openai_env(openai_port)) as server:
        yield server


@pytest.fixture(scope="module")
def impatient_server(
    tmp_path_factory: pytest.TempPathFactory, openai_port: StandInPort
) -> Iterator[SharedServer]:
    """The `openai` server, waiting 1 s at most for its upstream."""
    root = tmp_path_factory.mktemp("impatient")
    with module_server(root, **_openai_env(openai_port), LLM_REQUEST_TIMEOUT="1") as server:
        yield server


@pytest.fixture(scope="module")
def ollama_server(
    tmp_path_factory: pytest.TempPathFactory, ollama_port: StandInPort
) -> Iterator[SharedServer]:
    root = tmp_path_factory.mktemp("ollama")
    with module_server(root, LLM_BACKEND="ollama", OLLAMA_HOST=ollama_port.base_url) as server:
        yield server


@pytest.fixture
def on_openai(openai_server: SharedServer, request: pytest.FixtureRequest) -> SignedIn:
    return own_user(openai_server, request)


@pytest.fixture
def on_impatient(impatient_server: SharedServer, request: pytest.FixtureRequest) -> SignedIn:
    return own_user(impatient_server, request)


@pytest.fixture
def on_ollama(ollama_server: SharedServer, request: pytest.FixtureRequest) -> SignedIn:
    return own_user(ollama_server, request)


_sdk_clients: list[openai.OpenAI] = []


@pytest.fixture(autouse=True)
def _close_sdk_clients() -> Iterator[None]:
    """Close the test's SDK clients when it ends: the shared server outlives them, and a
    connection to it found open by the garbage collector is a ResourceWarning."""
    yield
    while _sdk_clients:
        _sdk_clients.pop().close()


def _sdk(server: SignedIn | LiveServer) -> openai.OpenAI:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    _sdk_clients.append(client)
    return client


def _last_request(upstream: OpenAIStandIn) -> dict[str, Any]:
    """The body of the last request the fake upstream received."""
    return dict(httpx.get(upstream.url.removesuffix("/v1") + "/stats").json()["last_request"])


def test_client_disconnect_stops_generation_and_keeps_the_conversation(
    openai_upstream: StandInPort, on_openai: SignedIn
) -> None:
    upstream = openai_upstream.serve_openai(tokens=200, delay=0.02)
    server = on_openai
    body = {
        "model": "fake-upstream",
        "stream": True,
        "session_id": "disconnect",
        "messages": [{"role": "user", "content": "tell me a long story"}],
    }
    with server.client() as http:
        with http.stream("POST", "/v1/chat/completions", json=body) as response:
            seen = []
            for line in response.iter_lines():
                if line.startswith("data: {"):
                    seen.append(json.loads(line[6:]))
                if len(seen) == 4:
                    break  # leaving the block closes the connection mid-stream
        conversation_id = seen[0]["agent"]["conversation_id"]

        stats_url = upstream.url.removesuffix("/v1") + "/stats"
        wait_for(lambda: httpx.get(stats_url).json()["disconnected"] == 1, timeout=10)
        assert httpx.get(stats_url).json()["completed"] == 0

        def assistant_recorded() -> bool:
            messages = http.get(f"/api/conversations/{conversation_id}").json()["messages"]
            return len(messages) == 2

        wait_for(assistant_recorded, timeout=10)
        messages = http.get(f"/api/conversations/{conversation_id}").json()["messages"]
        assert messages[0]["content"] == "tell me a long story"
        answer = messages[1]
        assert answer["metadata"]["finish_reason"] == "cancelled"
        assert answer["content"].startswith("tok0 tok1 ")
        assert len(answer["content"].split()) < 200
        assert http.get("/health").status_code == 200


def test_openai_upstream_through_the_sdk(openai_upstream: StandInPort, on_openai: SignedIn) -> None:
    openai_upstream.serve_openai(tokens=5, delay=0.001)
    client = _sdk(on_openai)
    completion = client.chat.completions.create(
        model="fake-upstream", messages=[{"role": "user", "content": "hi"}]
    )
    streamed = "".join(
        chunk.choices[0].delta.content or ""
        for chunk in client.chat.completions.create(
            model="fake-upstream", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        if chunk.choices
    )
    assert completion.choices[0].message.content == "tok0 tok1 tok2 tok3 tok4 "
    assert streamed == completion.choices[0].message.content


SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "city",
        "strict": True,
        "schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def test_an_openai_upstream_gets_the_response_format_and_sampling_as_sent(
    openai_upstream: StandInPort, on_openai: SignedIn
) -> None:
    upstream = openai_upstream.serve_openai(tokens=3, delay=0.001)
    client = _sdk(on_openai)
    client.chat.completions.create(
        model="fake-upstream",
        messages=[{"role": "user", "content": "hi"}],
        response_format=SCHEMA_FORMAT,  # type: ignore[arg-type]
        seed=3,
        presence_penalty=0.25,
    )
    sent = _last_request(upstream)
    assert sent["response_format"] == SCHEMA_FORMAT
    assert sent["seed"] == 3 and sent["presence_penalty"] == 0.25


def test_ollama_gets_the_schema_as_format_and_sampling_as_options(
    ollama_upstream: StandInPort, on_ollama: SignedIn
) -> None:
    ollama = ollama_upstream.serve_ollama(OLLAMA_MODELS, reply='{"city": "Paris"}')
    client = _sdk(on_ollama)
    completion = client.chat.completions.create(
        model="qwen:latest",
        messages=[{"role": "user", "content": "hi"}],
        response_format=SCHEMA_FORMAT,  # type: ignore[arg-type]
        seed=3,
        max_tokens=50,
    )
    assert json.loads(completion.choices[0].message.content or "") == {"city": "Paris"}
    sent = ollama.requests[-1]
    assert sent["format"] == SCHEMA_FORMAT["json_schema"]["schema"]  # type: ignore[index]
    assert sent["options"]["seed"] == 3 and sent["options"]["num_predict"] == 50


def test_unreachable_openai_upstream_is_a_clear_503(start_app: StartApp) -> None:
    server = start_app(
        LLM_BACKEND="openai",
        OPENAI_BASE_URL=f"http://127.0.0.1:{free_port()}/v1",
        OPENAI_MODEL="m",
        MODEL_PROBE="false",
    )
    with server.client() as http:
        body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        response = http.post("/v1/chat/completions", json=body)
    assert response.status_code == 503
    assert "not reachable" in response.json()["error"]["message"]


def test_ollama_down_fails_fast_with_the_fix(start_app: StartApp) -> None:
    server = start_app(
        LLM_BACKEND="ollama",
        OLLAMA_HOST=f"http://127.0.0.1:{free_port()}",
        OLLAMA_MODEL="qwen2.5",
        MODEL_PROBE="false",
    )
    started = time.monotonic()
    with server.client() as http:
        response = http.post(
            "/v1/chat/completions",
            json={"model": "qwen2.5", "messages": [{"role": "user", "content": "hi"}]},
        )
        chat = http.post("/api/chat", json={"message": "hi"})
    assert time.monotonic() - started < 10
    assert response.status_code == 503
    assert "ollama serve" in response.json()["error"]["message"]
    assert chat.status_code == 503 and "ollama serve" in chat.json()["detail"]


def test_ollama_missing_model_says_how_to_pull_it(start_server: StartServer) -> None:
    # A server of its own: its Ollama lists other models than the shared one's.
    with FakeOllama(free_port(), models=["llama3.2:latest"]) as ollama:
        server = start_server(LLM_BACKEND="ollama", OLLAMA_HOST=ollama.url, OLLAMA_MODEL="qwen2.5")
        client = _sdk(server)
        assert [m.id for m in client.models.list().data] == ["llama3.2:latest"]
        try:
            client.chat.completions.create(
                model="qwen2.5", messages=[{"role": "user", "content": "hi"}]
            )
        except openai.NotFoundError as error:
            assert "ollama pull qwen2.5" in error.message
        else:
            raise AssertionError("a missing Ollama model must be a 404")
        completion = client.chat.completions.create(
            model="llama3.2", messages=[{"role": "user", "content": "hi"}]
        )
    assert completion.choices[0].message.content == "Hello from Ollama. "
    assert completion.model == "llama3.2:latest"


def test_a_model_failing_mid_turn_is_a_clear_error_not_a_500(
    start_app: StartApp, tmp_path: Path
) -> None:
    server = start_app(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []), MODEL_PROBE="false")
    with server.client() as http:
        response = http.post("/api/chat", json={"message": "hello"})
    assert response.status_code == 503
    assert "no reply left" in response.json()["detail"]


def test_embeddings_come_from_ollama_in_openai_shape(
    ollama_upstream: StandInPort, on_ollama: SignedIn
) -> None:
    ollama = ollama_upstream.serve_ollama(OLLAMA_MODELS)
    client = _sdk(on_ollama)
    # The SDK asks for base64 by default and decodes it; float is the other format.
    default = client.embeddings.create(model="bge-m3:latest", input=["a", "abc def"])
    floats = client.embeddings.create(model="bge-m3:latest", input="abc", encoding_format="float")
    with pytest.raises(openai.NotFoundError) as missing:
        client.embeddings.create(model="nomic-embed-text", input="a")
    with pytest.raises(openai.BadRequestError) as dimensions:
        client.embeddings.create(model="bge-m3:latest", input="a", dimensions=8)
    assert [d.embedding for d in default.data] == [[1.0, 0.5, -1.0], [7.0, 0.5, -1.0]]
    assert [d.index for d in default.data] == [0, 1] and default.usage.prompt_tokens == 3
    assert floats.data[0].embedding == [3.0, 0.5, -1.0]
    assert "ollama pull nomic-embed-text" in missing.value.message
    assert "'dimensions'" in dimensions.value.message
    assert ollama.requests[0] == {"model": "bge-m3:latest", "input": ["a", "abc def"]}


def test_embeddings_pass_through_to_an_openai_upstream(
    openai_upstream: StandInPort, on_openai: SignedIn
) -> None:
    upstream = openai_upstream.serve_openai()
    client = _sdk(on_openai)
    answer = client.embeddings.create(
        model="text-embedding-3-small", input="hello", encoding_format="float", dimensions=2
    )
    sent = _last_request(upstream)
    assert answer.data[0].embedding == [0.25, -0.5]
    assert sent == {
        "model": "text-embedding-3-small",
        "input": ["hello"],
        "encoding_format": "float",
        "dimensions": 2,
    }


def test_ollama_calls_the_clients_tools_natively(
    ollama_upstream: StandInPort, on_ollama: SignedIn
) -> None:
    weather = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object"}},
    }
    ollama = ollama_upstream.serve_ollama(OLLAMA_MODELS)
    client = _sdk(on_ollama)
    completion = client.chat.completions.create(
        model="qwen:latest",
        messages=[{"role": "user", "content": "weather?"}],
        tools=[weather],  # type: ignore[list-item]
    )
    (call,) = completion.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    assert completion.choices[0].finish_reason == "tool_calls"
    assert ollama.requests[-1]["tools"][0]["function"]["name"] == "get_weather"


WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object"}},
}


def test_an_openai_upstreams_tool_calls_come_back_whole_and_streamed(
    openai_upstream: StandInPort, on_openai: SignedIn
) -> None:
    upstream = openai_upstream.serve_openai(tokens=3, delay=0.001)
    client = _sdk(on_openai)
    question = [{"role": "user", "content": "weather in Paris?"}]
    completion = client.chat.completions.create(
        model="fake-upstream",
        messages=question,
        tools=[WEATHER],  # type: ignore[list-item]
    )
    with client.chat.completions.stream(
        model="fake-upstream",
        messages=question,
        tools=[WEATHER],  # type: ignore[list-item]
    ) as stream:
        streamed = stream.get_final_completion()
    sent_tools = _last_request(upstream)
    # The client ran the tool; the result goes back upstream in OpenAI's shape.
    (call,) = completion.choices[0].message.tool_calls or []
    client.chat.completions.create(
        model="fake-upstream",
        messages=[
            *question,
            {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "18 C, sunny"},
        ],  # type: ignore[list-item]
    )
    sent_result = _last_request(upstream)
    for answer in (completion, streamed):
        (made,) = answer.choices[0].message.tool_calls or []
        assert made.id == "call_upstream1" and made.function.name == "get_weather"
        assert json.loads(made.function.arguments) == {"city": "Paris"}
        assert answer.choices[0].finish_reason == "tool_calls"
    assert sent_tools["tools"] == [WEATHER] and sent_tools["tool_choice"] == "auto"
    assistant, tool = sent_result["messages"][1:]
    assert assistant["tool_calls"][0]["id"] == "call_upstream1"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert tool == {"role": "tool", "content": "18 C, sunny", "tool_call_id": "call_upstream1"}


def test_logprobs_come_through_from_an_openai_upstream(
    openai_upstream: StandInPort, on_openai: SignedIn
) -> None:
    upstream = openai_upstream.serve_openai(tokens=3, delay=0.001)
    client = _sdk(on_openai)
    question = [{"role": "user", "content": "hi"}]
    completion = client.chat.completions.create(
        model="fake-upstream", messages=question, logprobs=True, top_logprobs=1
    )
    chunks = list(
        client.chat.completions.create(
            model="fake-upstream", messages=question, logprobs=True, stream=True
        )
    )
    sent = _last_request(upstream)
    whole = completion.choices[0].logprobs
    assert whole is not None and whole.content is not None
    assert [t.token for t in whole.content] == ["tok0 ", "tok1 ", "tok2 "]
    assert whole.content[0].logprob == -0.25 and whole.content[0].top_logprobs[0].token == "other"
    streamed = [
        t.token
        for chunk in chunks
        if chunk.choices and chunk.choices[0].logprobs
        for t in chunk.choices[0].logprobs.content or []
    ]
    assert streamed == ["tok0 ", "tok1 ", "tok2 "]
    assert sent["logprobs"] is True and "top_logprobs" not in sent


def test_logprobs_come_through_from_ollama(
    ollama_upstream: StandInPort, on_ollama: SignedIn
) -> None:
    ollama = ollama_upstream.serve_ollama(OLLAMA_MODELS, reply="Bonjour Paris")
    client = _sdk(on_ollama)
    completion = client.chat.completions.create(
        model="qwen:latest",
        messages=[{"role": "user", "content": "hi"}],
        logprobs=True,
        top_logprobs=2,
    )
    content = completion.choices[0].logprobs.content  # type: ignore[union-attr]
    assert [t.token for t in content or []] == ["Bonjour ", "Paris "]
    assert ollama.requests[-1]["logprobs"] is True and ollama.requests[-1]["top_logprobs"] == 2


def test_a_new_session_is_stored_in_order_by_the_time_its_stream_ends(
    openai_upstream: StandInPort, on_openai: SignedIn
) -> None:
    # A new session is written once the upstream has the request, and the answer once
    # the last bytes are out: a client that reads the conversation right away finds both.
    openai_upstream.serve_openai(tokens=3, delay=0.001)
    server = on_openai
    said = [{"role": "user", "content": "count to three"}]
    stream = _sdk(server).chat.completions.create(
        model="fake-upstream",
        messages=said,
        stream=True,  # type: ignore[arg-type]
    )
    chunks = list(stream)
    session_id = chunks[0].agent["session_id"]  # type: ignore[attr-defined]
    with server.client() as http:
        stored = _stored_turn(http, session_id)
    answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert answer == "tok0 tok1 tok2 "
    assert [(m["role"], m["content"]) for m in stored["messages"]] == [
        ("user", "count to three"),
        ("assistant", answer),
    ]
    assert stored["messages"][1]["metadata"]["finish_reason"] == "stop"


def test_an_upstream_error_is_a_clear_http_error_and_the_turn_is_stored(
    openai_upstream: StandInPort, on_openai: SignedIn
) -> None:
    openai_upstream.serve_openai(tokens=3, delay=0.001)
    said = [{"role": "user", "content": "fail with 500"}]
    body = {"model": "fake-upstream", "messages": said}
    with on_openai.client() as http:
        whole = http.post("/v1/chat/completions", json={**body, "session_id": "whole"})
        # Nothing was streamed yet: a streamed request gets the same HTTP error.
        streamed = http.post("/v1/chat/completions", json={**body, "stream": True})
        stored = _stored_turn(http, "whole")
        # The streamed request opened a new session: it failed before its first
        # event, and is stored all the same, its user message first.
        (fresh,) = [c for c in http.get("/api/conversations").json() if c["id"] != stored["id"]]
        fresh_turn = _stored_turn(http, fresh["session_id"])
    for response in (whole, streamed):
        assert response.status_code == 502
        assert "answered 500: the GPU caught fire" in response.json()["error"]["message"]
    for turn in (stored, fresh_turn):
        user, answer = turn["messages"]
        assert user["content"] == "fail with 500"
        assert answer["metadata"]["finish_reason"] == "error"
        assert "the GPU caught fire" in answer["metadata"]["error"]


def test_an_upstream_streaming_garbage_ends_the_stream_with_a_clear_error(
    openai_upstream: StandInPort, on_openai: SignedIn
) -> None:
    openai_upstream.serve_openai(tokens=3, delay=0.001)
    said = [{"role": "user", "content": "stream garbage"}]
    body = {"model": "fake-upstream", "messages": said, "session_id": "garbage"}
    with on_openai.client() as http:
        whole = http.post("/v1/chat/completions", json=body)
        # The upstream had accepted the request, so the stream had started: the
        # error is its last event.
        with http.stream("POST", "/v1/chat/completions", json={**body, "stream": True}) as response:
            lines = [line for line in response.iter_lines() if line.startswith("data: ")]
        stored = _stored_turn(http, "garbage")
    assert whole.status_code == 502 and "not JSON" in whole.json()["error"]["message"]
    assert response.status_code == 200 and lines[-1] == "data: [DONE]"
    assert "not JSON" in json.loads(lines[-2][6:])["error"]["message"]
    answers = [m for m in stored["messages"] if m["role"] == "assistant"]
    assert [a["metadata"]["finish_reason"] for a in answers] == ["error", "error"]


def _stored_turn(http: httpx.Client, session_id: str) -> dict[str, Any]:
    conversations = http.get("/api/conversations").json()
    (conversation,) = [c for c in conversations if c["session_id"] == session_id]
    return dict(http.get(f"/api/conversations/{conversation['id']}").json())


def _said(server: SignedIn, text: str, session: str, **more: Any) -> httpx.Response:
    body = {"model": "fake-upstream", "messages": [{"role": "user", "content": text}]}
    with server.client() as http:
        return http.post("/v1/chat/completions", json={**body, "session_id": session, **more})


def _stats(upstream: OpenAIStandIn) -> dict[str, Any]:
    return dict(httpx.get(upstream.url.removesuffix("/v1") + "/stats").json())


def test_a_rate_limited_upstream_is_retried_after_its_retry_after(
    openai_upstream: StandInPort, on_openai: SignedIn
) -> None:
    upstream = openai_upstream.serve_openai(tokens=3, delay=0.001)
    server = on_openai
    answered = _said(server, "rate limit twice", "limited")
    assert answered.status_code == 200, answered.text
    assert answered.json()["choices"][0]["message"]["content"] == "tok0 tok1 tok2 "
    assert _stats(upstream)["rate_limited"] == 2
    refused = _said(server, "rate limit always", "refused")
    assert _stats(upstream)["rate_limited"] == 2 + 4  # the try and three retries
    with server.client() as http:
        stored = _stored_turn(http, "refused")
    assert refused.status_code == 429, refused.text
    assert "answered 429: slow down" in refused.json()["error"]["message"]
    assert stored["messages"][1]["metadata"]["finish_reason"] == "error"


@pytest.mark.parametrize(
    ("text", "status", "message"),
    [
        ("drop mid-stream", 200, "cut the connection before its answer was complete"),
        ("stream a list", 200, "not a JSON object"),
        ("be slow", 504, "timed out"),
    ],
)
def test_upstream_faults_are_clear_errors_and_the_turn_is_stored(
    openai_upstream: StandInPort, on_impatient: SignedIn, text: str, status: int, message: str
) -> None:
    openai_upstream.serve_openai(tokens=10, delay=0.001)
    said = [{"role": "user", "content": text}]
    body = {"model": "fake-upstream", "messages": said, "session_id": "fault", "stream": True}
    with on_impatient.client() as http:
        with http.stream("POST", "/v1/chat/completions", json=body) as response:
            lines = [line for line in response.iter_lines() if line.startswith("data: ")]
            code = response.status_code
        stored = _stored_turn(http, "fault")
    assert code == status, lines
    if status == 200:  # the stream had started: its last event is the error
        assert lines[-1] == "data: [DONE]"
        assert message in json.loads(lines[-2][6:])["error"]["message"], lines[-2]
    answer = stored["messages"][1]
    assert answer["metadata"]["finish_reason"] == "error", answer
    assert answer["metadata"]["error"]
