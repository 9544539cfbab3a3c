"""Traces of a turn: the span tree, its GenAI attributes and the trace id a user can quote.

In this process, with the OpenTelemetry SDK's in-memory exporter (the server in a thread,
so the sandbox runs for real); then once over OTLP/HTTP, from a live server to a receiver
on loopback that decodes what it is sent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.conftest import ADMIN_PASSWORD, scripted_server, write_replies
from tests.support.agent_script import react_turn
from tests.support.live_server import free_port
from tests.support.otlp_receiver import receiving

CODE = "print('total', 6 * 7)\n"
REVIEW = {"when": "[stage: review]", "content": '{"answers_question": true}', "repeat": True}
CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages")


def replies(tag: str) -> list[dict[str, Any]]:
    plain = {"when": f"{tag} hello", "content": "Hello!", "repeat": True}
    return [REVIEW, plain, *react_turn(tag, CODE, "The total is 42.")]


# In this process


@contextmanager
def traced_server(
    root: Path, tag: str, *, content: bool
) -> Iterator[tuple[str, InMemorySpanExporter]]:
    """The app on uvicorn in a thread, its spans kept in memory; tracing off afterwards."""
    from backend.config import load_settings
    from backend.main import create_app
    from backend.observability import tracing

    port = free_port()
    settings = load_settings(
        HOST="127.0.0.1",
        PORT=port,
        DATA_DIR=root / "data",
        LLM_BACKEND="scripted",
        SCRIPTED_REPLIES=write_replies(root / "replies.json", replies(tag)),
        ADMIN_PASSWORD=ADMIN_PASSWORD,
        TRACE_CONTENT=content,
    )
    app = create_app(settings)
    exporter = InMemorySpanExporter()
    # Synchronous export: every span is in the exporter once it has ended.
    tracing.configure_tracing(record_content=content, processor=SimpleSpanProcessor(exporter))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert thread.is_alive(), "the server stopped while starting"
            assert time.monotonic() < deadline, "the server did not start in 60 s"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", exporter
    finally:
        server.should_exit = True
        thread.join(30)
        tracing.shutdown_tracing()  # tracing off again for the rest of this process


def login(url: str) -> dict[str, str]:
    response = httpx.post(
        f"{url}/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
    )
    response.raise_for_status()
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def chat(url: str, headers: dict[str, str], tag: str) -> httpx.Response:
    response = httpx.post(
        f"{url}/api/chat",
        headers=headers,
        json={"message": f"{tag} what is 6 times 7?", "agent_type": "react"},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    assert response.json()["answer"] == "The total is 42."
    return response


def shape(spans: list[ReadableSpan], root: ReadableSpan) -> tuple[Any, ...]:
    """`root`'s subtree as (name, stage, children sorted), to compare with a literal."""
    children = [s for s in spans if s.parent is not None and s.parent.span_id == _id(root)]
    stage = attrs(root).get("pda.llm.stage")
    return (root.name, stage, sorted(shape(spans, child) for child in children))


def _id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def finished(exporter: InMemorySpanExporter, name: str, timeout: float = 10) -> list[ReadableSpan]:
    """The spans ended so far, once one called `name` is among them."""
    deadline = time.monotonic() + timeout
    while True:
        spans = list(exporter.get_finished_spans())
        if any(s.name == name for s in spans):
            return spans
        assert time.monotonic() < deadline, f"no {name!r} span in {timeout} s"
        time.sleep(0.01)


def the(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def test_a_react_turn_is_one_trace_of_agent_tool_llm_and_sandbox_spans(tmp_path: Path) -> None:
    with traced_server(tmp_path, "TRACE-1", content=False) as (url, exporter):
        headers = login(url)
        exporter.clear()  # the login's
        response = chat(url, headers, "TRACE-1")
        # The request's span ends just after its response's last byte has gone.
        spans = finished(exporter, "POST /api/chat")
        missing = httpx.get(f"{url}/api/does-not-exist", headers=headers)
    conversation = response.json()["conversation_id"]
    agent = the(spans, "invoke_agent react")
    model = "chat scripted"
    assert shape(spans, agent) == (
        "invoke_agent react",
        None,
        [
            (model, "react", []),
            (
                "execute_tool python_coder",
                None,
                [(model, "answer", []), (model, "generate", []), ("sandbox.run", None, [])],
            ),
        ],
    )
    # One trace, under the request's server span, whose id the response carries.
    request = the(spans, "POST /api/chat")
    assert request.parent is None
    assert agent.parent is not None and agent.parent.span_id == _id(request)
    assert agent.context is not None
    trace_id = format(agent.context.trace_id, "032x")
    assert response.headers["x-trace-id"] == trace_id
    assert {format(s.context.trace_id, "032x") for s in spans if s.context} == {trace_id}
    assert attrs(request)["http.route"] == "/api/chat"

    turn = [s for s in spans if s is not request]
    for span in turn:
        attributes = attrs(span)
        assert attributes["gen_ai.conversation.id"] == conversation, span.name
        assert not set(CONTENT_KEYS) & set(attributes), span.name  # TRACE_CONTENT is off
    calls = [s for s in turn if s.name == model]
    for call in calls:
        attributes = attrs(call)
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == "scripted"
        assert attributes["gen_ai.provider.name"]
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] > 0
    root = attrs(agent)
    assert root["gen_ai.operation.name"] == "invoke_agent"
    assert root["gen_ai.agent.name"] == "react"
    assert root["gen_ai.request.model"] == "scripted"
    assert root["pda.turn.outcome"] == "answered"
    for kind in ("input", "output"):  # the turn's totals are its calls'
        key = f"gen_ai.usage.{kind}_tokens"
        assert root[key] == sum(attrs(c)[key] for c in calls)
    tool = attrs(the(spans, "execute_tool python_coder"))
    assert tool["gen_ai.operation.name"] == "execute_tool"
    assert tool["gen_ai.tool.name"] == "python_coder"
    assert attrs(the(spans, "sandbox.run"))["pda.sandbox.success"] is True

    # An error's body names its trace, as its header does.
    assert missing.status_code == 404
    assert missing.json()["trace_id"] == missing.headers["x-trace-id"]
    assert len(missing.json()["trace_id"]) == 32 and missing.json()["trace_id"] != trace_id


def test_plain_chat_is_one_chat_span_under_its_request(tmp_path: Path) -> None:
    """No agent runs: no invoke_agent span, so a gateway's request costs one span more, not two."""
    with traced_server(tmp_path, "TRACE-3", content=False) as (url, exporter):
        headers = login(url)
        exporter.clear()
        response = httpx.post(
            f"{url}/api/chat",
            headers=headers,
            json={"message": "TRACE-3 hello", "agent_type": "chat"},
            timeout=60,
        )
        assert response.status_code == 200 and response.json()["answer"] == "Hello!"
        spans = finished(exporter, "POST /api/chat")
    request = the(spans, "POST /api/chat")
    assert shape(spans, request) == ("POST /api/chat", None, [("chat scripted", "chat", [])])
    call = attrs(the(spans, "chat scripted"))
    assert call["gen_ai.conversation.id"] == response.json()["conversation_id"]
    assert call["gen_ai.usage.output_tokens"] > 0
    assert not [s for s in spans if s.name.startswith("invoke_agent")]


def test_trace_content_records_the_prompts_and_replies(tmp_path: Path) -> None:
    with traced_server(tmp_path, "TRACE-2", content=True) as (url, exporter):
        chat(url, login(url), "TRACE-2")
        spans = list(exporter.get_finished_spans())
    calls = [s for s in spans if s.name == "chat scripted"]
    assert len(calls) == 3
    for call in calls:
        attributes = attrs(call)
        assert all(key in attributes for key in CONTENT_KEYS), call.name
    react = next(c for c in calls if attrs(c)["pda.llm.stage"] == "react")
    assert "TRACE-2 what is 6 times 7?" in str(attrs(react)["gen_ai.input.messages"])
    assert "Action: coder" in str(attrs(react)["gen_ai.output.messages"])


# Over OTLP/HTTP


def value(attribute: AnyValue) -> Any:
    return getattr(attribute, attribute.WhichOneof("value") or "string_value")


def test_spans_reach_an_otlp_http_receiver(tmp_path: Path) -> None:
    with receiving() as receiver:
        endpoint = receiver.url
        with scripted_server(
            tmp_path,
            replies("OTLP-1"),
            OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
            OTEL_BSP_SCHEDULE_DELAY="100",
            OTEL_SERVICE_NAME="pda-under-test",
        ) as live:
            with live.client() as http_client:
                response = http_client.post(
                    "/api/chat",
                    json={"message": "OTLP-1 what is 6 times 7?", "agent_type": "react"},
                )
                assert response.status_code == 200, response.text
                conversation = response.json()["conversation_id"]
                # A request that logs a line (at INFO) while it is handled.
                deleted = http_client.delete(f"/api/conversations/{conversation}")
                assert deleted.status_code == 204, deleted.text
            agent = receiver.wait_for("invoke_agent react", timeout=30)
            receiver.wait_for("execute_tool python_coder", timeout=30)
            receiver.wait_for("DELETE /api/conversations/{conversation_id}", timeout=30)
            log = live.log()
    attributes = {a.key: value(a.value) for a in agent.attributes}
    assert attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attributes["gen_ai.agent.name"] == "react"
    assert attributes["gen_ai.request.model"] == "scripted"
    assert attributes["gen_ai.conversation.id"] == conversation
    assert attributes["gen_ai.usage.input_tokens"] > 0
    assert attributes["gen_ai.usage.output_tokens"] > 0
    assert not set(CONTENT_KEYS) & set(attributes)
    trace_id = agent.trace_id.hex()
    assert response.headers["x-trace-id"] == trace_id
    # A log line names the trace of the request it was written in.
    line = f"[trace {deleted.headers['x-trace-id']}]: Deleted session"
    assert line in log, log[-3000:]
