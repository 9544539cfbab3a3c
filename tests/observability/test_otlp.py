"""Spans over OTLP/HTTP, as the server sends them: the SDK's exporter delivers every kind of
span and value to a receiver (gzip too) as OpenTelemetry's encoder makes them; and the
server's batch export sends every sampled span by the time tracing has stopped, and no
unsampled one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from backend.observability import tracing
from tests.support.otlp_receiver import Receiver, receiving

VALUES = {
    "text": "plain",
    "unicode": "Grüße, 世界 🙂",
    "empty": "",
    "true": True,
    "false": False,
    "zero": 0,
    "int": 42,
    "negative": -7,
    "int64 max": 2**63 - 1,
    "int64 min": -(2**63),
    "float": 0.125,
    "negative float": -1e300,
    "strings": ("a", "b"),
    "ints": (1, 2, 3),
    "bools": (True, False),
    "floats": (1.5,),
}


def spans_of(*providers: TracerProvider) -> list[ReadableSpan]:
    """Spans of every shape, from each provider (a resource each) and two scopes each."""
    for provider in providers:
        for scope in ("one", "two"):
            tracer = provider.get_tracer(scope, "1.0", schema_url="https://example.test/s")
            remote = SpanContext(
                trace_id=0x0AF7651916CD43DD8448EB211C80319C,
                span_id=0x00F067AA0BA902B7,
                is_remote=True,
                trace_flags=TraceFlags(TraceFlags.SAMPLED),
                trace_state=TraceState([("vendor", "value"), ("other", "x")]),
            )
            with tracer.start_as_current_span(
                "root",
                context=trace.set_span_in_context(trace.NonRecordingSpan(remote)),
                kind=SpanKind.SERVER,
                attributes=VALUES,
            ) as root:
                root.set_status(Status(StatusCode.ERROR, "it broke: ü"))
                for kind in SpanKind:
                    with tracer.start_as_current_span(f"child {kind.name}", kind=kind) as child:
                        child.set_attribute("kind", kind.name)
                with tracer.start_as_current_span("ok") as span:
                    span.set_status(Status(StatusCode.OK))
                with tracer.start_as_current_span("with event") as span:
                    span.add_event("happened", {"n": 1, "what": "it"})
                with tracer.start_as_current_span(
                    "with link", links=[Link(root.get_span_context(), {"why": "because"})]
                ):
                    pass
                with tracer.start_as_current_span("many attributes") as span:
                    for number in range(40):  # over the limit below: some are dropped
                        span.set_attribute(f"key {number}", number)
    return [span for provider in providers for span in provider.exported.get_finished_spans()]


def provider(name: str) -> TracerProvider:
    made = TracerProvider(
        resource=Resource.create({"service.name": name}, schema_url="https://example.test/r"),
        span_limits=SpanLimits(max_span_attributes=32),
    )
    made.exported = InMemorySpanExporter()  # type: ignore[attr-defined]
    made.add_span_processor(SimpleSpanProcessor(made.exported))  # type: ignore[attr-defined]
    return made


@pytest.fixture
def spans() -> Iterator[list[ReadableSpan]]:
    providers = [provider("first"), provider("second")]
    yield spans_of(*providers)
    for made in providers:
        made.shutdown()


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_the_exporter_delivers_to_a_receiver(
    spans: list[ReadableSpan], compression: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", compression)
    with receiving() as receiver:
        exporter = OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces")
        assert exporter.export(spans) is SpanExportResult.SUCCESS
        exporter.shutdown()
        assert exporter.export(spans) is SpanExportResult.FAILURE  # after shutdown: refused
    assert receiver.exports == 1
    resources = encode_spans(spans).resource_spans
    expected = [span for r in resources for scope in r.scope_spans for span in scope.spans]
    assert receiver.spans == expected


def test_an_unreachable_receiver_is_a_failure_not_an_exception(
    spans: list[ReadableSpan],
) -> None:
    with receiving() as receiver:
        url = f"{receiver.url}/v1/traces"
    exporter = OTLPSpanExporter(endpoint=url, timeout=2)
    assert exporter.export(spans[:1]) is SpanExportResult.FAILURE
    exporter.shutdown()


# The server's batch export (tracing.configure_tracing)


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    with receiving() as receiving_:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiving_.url)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "64")
        yield receiving_
        tracing.shutdown_tracing()


def make(tracer: trace.Tracer, count: int, prefix: str) -> None:
    for number in range(count):
        with tracer.start_as_current_span(f"{prefix} {number}", attributes={"n": number}):
            pass


def names(receiver: Receiver) -> list[str]:
    with receiver.changed:
        return [span.name for span in receiver.spans]


def test_every_span_is_sent_by_the_time_it_has_stopped(receiver: Receiver) -> None:
    assert tracing.configure_tracing()
    tracer = tracing.get_tracer()
    make(tracer, 1000, "span")
    tracing.shutdown_tracing()
    assert sorted(names(receiver)) == sorted(f"span {n}" for n in range(1000))
    assert receiver.exports >= 1000 // 64
    make(tracer, 3, "after")  # a stopped processor takes no more
    assert not [name for name in names(receiver) if name.startswith("after")]


def test_unsampled_spans_are_not_sent(receiver: Receiver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    assert tracing.configure_tracing()
    make(tracing.get_tracer(), 10, "dropped")
    tracing.shutdown_tracing()
    assert names(receiver) == []
