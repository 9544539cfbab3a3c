"""The server's spans against a plain SDK's: the same calls give the same recorded span
(name, kind, parent, attributes in order, dropped counts, events, status), for the processors
and exporters that read it; the sampler, limits and service name come from the standard
OTEL_* variables."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from backend.observability import tracing

RESOURCE = Resource.create({"service.name": "spans-test"})


@pytest.fixture(autouse=True)
def tracing_off_after() -> Iterator[None]:
    yield
    tracing.shutdown_tracing()


def configured(exporter: InMemorySpanExporter) -> trace.Tracer:
    """The server's tracer (tracing.configure_tracing), its spans into `exporter`."""
    assert tracing.configure_tracing(processor=SimpleSpanProcessor(exporter))
    return tracing.get_tracer()


def record(tracer: trace.Tracer) -> None:
    """Every call the server makes on a span, and a few it doesn't."""
    with tracer.start_as_current_span(
        "POST", kind=SpanKind.SERVER, attributes={"http.request.method": "POST"}
    ) as server:
        child = tracer.start_span(
            "chat m", kind=SpanKind.CLIENT, attributes={"a": 1, "b": "x", "c": True}
        )
        child.set_attributes({"tokens": 12, "ratio": 0.5, "list": [1, 2], "none": None})
        child.set_attribute("a", 2)  # set again: moves to the end
        child.set_attribute("object", Resource)  # an unknown type: its str
        child.set_attribute("", "empty key")  # dropped
        for number in range(8):  # over the limit: the oldest go
            child.set_attribute(f"n{number}", number)
        child.add_event("happened", {"what": "it", "seq": ("a", "b")})
        child.set_status(Status(StatusCode.ERROR, "boom"))
        child.end()
        child.set_attribute("after", "end")  # ignored
        child.update_name("renamed after end")  # ignored
        child.end()  # once only
        server.update_name("POST /v1/chat/completions")
        server.set_status(StatusCode.OK)
        server.set_status(Status(StatusCode.ERROR, "too late"))  # OK is final
    with pytest.raises(ValueError), tracer.start_as_current_span("raises"):
        raise ValueError("no")


def recorded(make: Callable[[TracerProvider, InMemorySpanExporter], trace.Tracer]) -> list[Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE, span_limits=SpanLimits(max_span_attributes=10))
    tracer = make(provider, exporter)
    record(tracer)
    spans = exporter.get_finished_spans()
    assert len(spans) == 3
    return [summary(span) for span in spans]


def summary(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None and context.is_valid and context.trace_flags.sampled
    return {
        "name": span.name,
        "kind": span.kind,
        "has parent": span.parent is not None,
        "attributes": list(span.attributes.items()) if span.attributes else [],
        "dropped": span.dropped_attributes,
        "events": [
            (e.name, {k: v for k, v in e.attributes.items() if k != "exception.stacktrace"})
            for e in span.events
        ],
        "status": (span.status.status_code, span.status.description),
        "resource": span.resource.attributes["service.name"],
        "timed": span.start_time is not None
        and span.end_time is not None
        and span.end_time >= span.start_time,
    }


def sdk(provider: TracerProvider, exporter: InMemorySpanExporter) -> trace.Tracer:
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test")


def server(provider: TracerProvider, exporter: InMemorySpanExporter) -> trace.Tracer:
    return configured(exporter)  # its own provider, from the environment


def test_the_servers_spans_record_what_the_sdks_record(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "10")  # the server's reads the env
    monkeypatch.setenv("OTEL_SERVICE_NAME", "spans-test")
    theirs, ours = recorded(sdk), recorded(server)
    assert ours == theirs
    child = ours[0]
    assert child["dropped"] > 0 and ("n7", 7) in child["attributes"]
    assert child["events"][0] == ("happened", {"what": "it", "seq": ("a", "b")})
    assert ours[2]["events"][0][1]["exception.type"] == "ValueError"


def test_the_sampler_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    exporter = InMemorySpanExporter()
    tracer = configured(exporter)
    with tracer.start_as_current_span("GET") as span:
        assert not span.is_recording() and isinstance(span, trace.NonRecordingSpan)
        assert span.get_span_context().is_valid  # a trace id to quote all the same
        assert tracing.current_trace_id() is not None
    assert exporter.get_finished_spans() == ()


def test_a_child_continues_its_parents_trace() -> None:
    exporter = InMemorySpanExporter()
    tracer = configured(exporter)
    with tracer.start_as_current_span("parent") as parent:
        child = tracer.start_span("child")
        child.end()
    first, second = exporter.get_finished_spans()
    assert first.name == "child" and second.name == "parent"
    assert first.parent == parent.get_span_context()
    assert (
        first.context is not None and first.context.trace_id == parent.get_span_context().trace_id
    )


def test_a_server_span_is_current_while_it_lasts_and_records_what_escapes() -> None:
    exporter = InMemorySpanExporter()
    tracing.configure_tracing(processor=SimpleSpanProcessor(exporter))
    try:
        with (
            pytest.raises(ValueError),
            tracing.server_span("GET", {"http.request.method": "GET"}) as span,
        ):
            assert tracing.current_trace_id() == format(span.get_span_context().trace_id, "032x")
            raise ValueError("no such thing")
        assert tracing.current_trace_id() is None  # no longer current
        with tracing.server_span("GET", {}):
            pass
    finally:
        tracing.shutdown_tracing()
    failed, fine = exporter.get_finished_spans()
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.status.description == "ValueError: no such thing"
    assert [event.name for event in failed.events] == ["exception"]
    assert fine.status.status_code is StatusCode.UNSET and not fine.events
    assert failed.kind is SpanKind.SERVER and failed.end_time is not None
