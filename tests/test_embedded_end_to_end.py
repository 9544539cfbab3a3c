"""The product as a newcomer runs it: no Ollama, the embedded model, the openai SDK.

The tests on the embedded model with its defaults share one server (it takes seconds to
start and to load the model), each as a user of its own (tests/support/shared_server.py).
A test of another setting (`auto`, a token or a time limit) starts a server of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from tests.conftest import StartServer
from tests.support.live_server import free_port
from tests.support.shared_server import SharedServer, SignedIn, module_server, own_user


@pytest.fixture(scope="module")
def embedded_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    """A server on the embedded model (LLM_BACKEND=embedded), for the module."""
    with module_server(tmp_path_factory.mktemp("embedded"), LLM_BACKEND="embedded") as server:
        yield server


@pytest.fixture
def on_embedded(embedded_server: SharedServer, request: pytest.FixtureRequest) -> SignedIn:
    """The test's own user of the embedded server: its sessions and sandboxes are its own."""
    return own_user(embedded_server, request)


def test_openai_sdk_chats_with_the_embedded_model(start_server: StartServer) -> None:
    server = start_server(LLM_BACKEND="auto", OLLAMA_HOST=f"http://127.0.0.1:{free_port()}")
    admin = {"Authorization": f"Bearer {server.token()}"}  # the details are for admins
    health = httpx.get(f"{server.url}/health", headers=admin).json()
    assert health["llm"]["backend"] == "embedded"
    assert "Ollama did not answer" in health["llm"]["reason"]

    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    model = client.models.list().data[0].id
    completion = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=32,
    )
    answer = completion.choices[0].message.content
    assert answer and answer.strip()
    assert completion.choices[0].finish_reason in ("stop", "length")

    pieces = [
        chunk.choices[0].delta.content
        for chunk in client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "Name three colours."}],
            max_tokens=24,
            stream=True,
        )
        if chunk.choices and chunk.choices[0].delta.content
    ]
    assert len(pieces) >= 3


def test_the_embedded_model_answers_a_question_about_a_csv(on_embedded: SignedIn) -> None:
    server = on_embedded
    rows = "\n".join(f"{region},{price}" for region, price in [("north", 12.5), ("south", 30)] * 5)
    with server.client(timeout=300) as http:
        upload = http.post(
            "/api/upload",
            data={"session_id": "e2e"},
            files={"file": ("sales.csv", f"region,price\n{rows}\n".encode())},
        )
        assert upload.status_code == 201
        result = http.post(
            "/api/tools/python_coder",
            json={"session_id": "e2e", "query": "what is the mean of column price in sales.csv?"},
        ).json()
    assert result["success"], result
    assert "21.25" in result["output"] and "21.25" in result["answer"]
    # A small model writes no answer (issue 39): it is what the run printed.
    assert result["answer"].startswith(("The result is ", "Here is what the code printed:"))
    assert result["output"].strip() in result["answer"]


def test_the_embedded_model_answers_through_the_react_agent(on_embedded: SignedIn) -> None:
    server = on_embedded
    rows = "\n".join(f"{region},{price}" for region, price in [("north", 12.5), ("south", 30)] * 5)
    with server.client(timeout=300) as http:
        http.post(
            "/api/upload",
            data={"session_id": "agent"},
            files={"file": ("sales.csv", f"region,price\n{rows}\n".encode())},
        )
        reply = http.post(
            "/api/chat",
            json={
                "session_id": "agent",
                "message": "What is the mean of column price in sales.csv?",
            },
        ).json()
    assert reply["agent_type"] == "react", reply
    assert "21.25" in reply["answer"]
    assert reply["metadata"]["tool_calls"][0]["tool"] == "python_coder"
    assert reply["metadata"]["iterations"] == 1
    # The plumbing of issue 14 on the real model: 21.25 cites the line that printed it.
    cited = [c for c in reply["citations"] if c["text"] == "21.25"]
    assert cited and all(c["kind"] == "computed" and "21.25" in c["output_line"] for c in cited)


def test_auto_on_the_embedded_model_runs_code_for_a_question_about_a_file(
    on_embedded: SignedIn,
) -> None:
    """Issue 39: this was routed to chat and answered "Qatar, about $1.2 billion"."""
    server = on_embedded
    rows = "".join(
        f"{region},{revenue}\n" for region, revenue in [("East", 700), ("West", 500)] * 3
    )
    with server.client(timeout=300) as http:
        http.post(
            "/api/upload",
            data={"session_id": "auto"},
            files={"file": ("sales.csv", f"region,revenue\n{rows}".encode())},
        )
        reply = http.post(
            "/api/chat",
            json={"session_id": "auto", "message": "Which region had the highest total revenue?"},
        ).json()
    assert reply["agent_type"] == "react", reply
    assert reply["metadata"]["route_reason"] == (
        "With files here and a small model, data questions always run code."
    )
    assert reply["metadata"]["tool_calls"][0]["tool"] == "python_coder"
    answer = reply["answer"]
    assert answer.startswith(("The result is ", "Here is what the code printed:")), answer
    assert "```python" not in answer and "Output:" not in answer


class City(BaseModel):
    city: str
    population: int


def test_structured_outputs_follow_the_schema_on_the_embedded_model(
    on_embedded: SignedIn,
) -> None:
    server = on_embedded
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    question = [{"role": "user", "content": "The largest city of France and its population?"}]
    # json_schema, strict: the SDK builds the schema from the model and parses the reply.
    parsed = client.chat.completions.parse(
        model="smollm2-135m-instruct", messages=question, response_format=City, max_tokens=120
    )
    city = parsed.choices[0].message.parsed
    assert isinstance(city, City) and city.city

    # json_object, streamed: the pieces join into one JSON object.
    pieces = [
        chunk.choices[0].delta.content
        for chunk in client.chat.completions.create(
            model="smollm2-135m-instruct",
            messages=question,
            response_format={"type": "json_object"},
            max_tokens=120,
            stream=True,
        )
        if chunk.choices and chunk.choices[0].delta.content
    ]
    assert len(pieces) > 1 and isinstance(json.loads("".join(pieces)), dict)


def test_logprobs_on_the_embedded_model_whole_and_streamed(on_embedded: SignedIn) -> None:
    server = on_embedded
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    question = [{"role": "user", "content": "What is the capital of France?"}]
    asked = {"logprobs": True, "top_logprobs": 3, "temperature": 0, "max_tokens": 12}
    whole = client.chat.completions.create(
        model="smollm2-135m-instruct",
        messages=question,
        **asked,  # type: ignore[arg-type]
    )
    content = whole.choices[0].logprobs.content  # type: ignore[union-attr]
    assert content and "".join(t.token for t in content) == whole.choices[0].message.content
    assert all(len(t.top_logprobs) == 3 and t.logprob <= 0 for t in content)
    streamed = [
        token
        for chunk in client.chat.completions.create(
            model="smollm2-135m-instruct",
            messages=question,
            stream=True,
            **asked,  # type: ignore[arg-type]
        )
        if chunk.choices and chunk.choices[0].logprobs
        for token in chunk.choices[0].logprobs.content or []
    ]
    assert [t.token for t in streamed] == [t.token for t in content]  # greedy: the same answer


def test_a_required_tool_call_is_valid_on_the_embedded_model(on_embedded: SignedIn) -> None:
    server = on_embedded
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    weather = {
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
    completion = client.chat.completions.create(
        model="smollm2-135m-instruct",
        messages=[{"role": "user", "content": "What is the weather in Paris?"}],
        tools=[weather],  # type: ignore[list-item]
        tool_choice="required",
        max_tokens=80,
    )
    (call,) = completion.choices[0].message.tool_calls or []
    assert call.function.name == "get_weather"
    assert isinstance(json.loads(call.function.arguments)["city"], str)
    assert completion.choices[0].finish_reason == "tool_calls"


def test_a_request_without_max_tokens_gets_the_embedded_default(start_server: StartServer) -> None:
    server = start_server(LLM_BACKEND="embedded", EMBEDDED_MAX_TOKENS="24")
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    completion = client.chat.completions.create(
        model=client.models.list().data[0].id,
        messages=[{"role": "user", "content": "Write a very long story about a dragon."}],
    )
    assert completion.usage is not None and completion.usage.completion_tokens <= 24
    assert completion.choices[0].finish_reason == "length"


def test_a_two_step_plan_on_the_embedded_model_finishes_well_within_its_bound(
    start_server: StartServer,
) -> None:
    # Issue 12's bar case: this ran past 10 minutes before turns were bounded and the small
    # model's Plan-and-Execute followed the steps the question spells out.
    server = start_server(LLM_BACKEND="embedded", AGENT_TURN_TIMEOUT="240")
    scores = "name,score\n" + "".join(f"p{i},{50 + i % 37}\n" for i in range(40))
    with server.client(timeout=300) as http:
        upload = http.post(
            "/api/upload", data={"session_id": "bar"}, files={"file": ("scores.csv", scores)}
        )
        assert upload.status_code == 201
        answer = http.post(
            "/api/chat",
            json={
                "message": "first count the rows, then compute the mean score",
                "session_id": "bar",
                "agent_type": "plan_execute",
            },
        ).json()
        conversation = http.get(f"/api/conversations/{answer['conversation_id']}").json()
    stored = conversation["messages"][-1]
    assert stored["metadata"]["finish_reason"] == "stop", stored
    plan = next(s for s in stored["metadata"]["steps"] if s["type"] == "plan")
    assert [step["goal"] for step in plan["steps"]] == ["count the rows", "compute the mean score"]
    assert "40" in answer["answer"], answer["answer"]


def test_code_interpreter_through_the_sdk_on_the_embedded_model(on_embedded: SignedIn) -> None:
    """Issue 29's flow end to end on the real (tiny) model: only the shape is checked."""
    server = on_embedded
    client = openai.OpenAI(
        base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0, timeout=300
    )
    rows = "\n".join(f"{region},{price}" for region, price in [("north", 12.5), ("south", 30)] * 5)
    data = client.files.create(
        file=("sales.csv", f"region,price\n{rows}\n".encode()), purpose="user_data"
    )
    tool: Any = {"type": "code_interpreter", "container": {"type": "auto", "file_ids": [data.id]}}
    response = client.responses.create(
        model="smollm2-135m-instruct",
        input="What is the mean of column price in sales.csv?",
        tools=[tool],
        include=["code_interpreter_call.outputs"],
    )
    assert response.status == "completed" and response.output_text.strip()
    calls = [item for item in response.output if item.type == "code_interpreter_call"]
    assert calls and all(call.container_id.startswith("cntr_") for call in calls)
    assert all(call.code and call.outputs is not None for call in calls)
    listed = client.containers.files.list(calls[0].container_id)
    assert "/workspace/uploads/sales.csv" in [f.path for f in listed]
