"""Spans handed to the exporter process: rebuilt there as they were (their OTLP encoding the
same), all sent by the time the server has stopped, not handed over unless sampled, and a
child that dies is started again."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from backend.observability import handover, otlp
from backend.observability.export_worker import rebuild
from backend.observability.spans import LeanTracer
from tests.observability.test_otlp import provider, spans_of
from tests.support.otlp_receiver import Receiver, receiving

RESOURCE = Resource.create({"service.name": "handover-test"})


def test_a_rebuilt_span_encodes_as_the_original() -> None:
    made = [provider("first"), provider("second")]
    spans = spans_of(*made)
    for span in spans:
        copy = rebuild(handover.flatten(span), span.resource)
        ours = ExportTraceServiceRequest.FromString(otlp.encode_request([copy]))
        assert ours == ExportTraceServiceRequest.FromString(otlp.encode_request([span]))
    for each in made:
        each.shutdown()


@pytest.fixture
def receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    with receiving() as receiving_:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiving_.url)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "64")
        yield receiving_


def make(tracer: LeanTracer, count: int, prefix: str) -> None:
    for number in range(count):
        with tracer.start_as_current_span(f"{prefix} {number}", attributes={"n": number}):
            pass


def kill(pid: int) -> None:
    """SIGKILL, then until the process has exited (a zombie, or reaped: its pipe is closed)."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state == "Z":
            return
        assert time.monotonic() < deadline, f"process {pid} still running"
        time.sleep(0.01)


def names(receiver: Receiver) -> list[str]:
    with receiver.changed:
        return [span.name for span in receiver.spans]


def test_every_span_is_sent_by_the_time_it_has_stopped(receiver: Receiver) -> None:
    processor = handover.HandoverSpanProcessor(RESOURCE)
    tracer = LeanTracer(TracerProvider(resource=RESOURCE), processor, "test")
    make(tracer, 1000, "span")
    processor.shutdown()
    assert sorted(names(receiver)) == sorted(f"span {n}" for n in range(1000))
    assert receiver.exports >= 1000 // 64
    make(tracer, 3, "after")  # a stopped processor takes no more
    assert not [name for name in names(receiver) if name.startswith("after")]


def test_unsampled_spans_are_not_handed_over(receiver: Receiver) -> None:
    processor = handover.HandoverSpanProcessor(RESOURCE)
    tracer = LeanTracer(TracerProvider(sampler=ALWAYS_OFF, resource=RESOURCE), processor, "t")
    make(tracer, 10, "dropped")
    processor.shutdown()
    assert names(receiver) == []


def test_a_child_that_dies_is_started_again(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(handover, "RESTART_AFTER", 0.0)
    processor = handover.HandoverSpanProcessor(RESOURCE)
    tracer = LeanTracer(TracerProvider(resource=RESOURCE), processor, "test")
    first = processor.child_pid
    assert first is not None
    kill(first)
    receiver_before = len(names(receiver))
    make(tracer, 5, "later")
    processor.force_flush()  # to a new child
    make(tracer, 5, "again")
    processor.shutdown()
    assert processor.child_pid is None
    sent = names(receiver)[receiver_before:]
    assert sorted(sent) == sorted(f"{word} {n}" for word in ("later", "again") for n in range(5))


def test_a_dead_child_costs_spans_not_the_servers_time(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    processor = handover.HandoverSpanProcessor(RESOURCE)
    tracer = LeanTracer(TracerProvider(resource=RESOURCE), processor, "test")
    child = processor.child_pid
    assert child is not None
    kill(child)
    make(tracer, 5000, "many")  # more than the queue holds: the oldest go
    processor.shutdown()  # not restarted within RESTART_AFTER: the spans are dropped
    assert not [name for name in names(receiver) if name.startswith("many")]
    assert "span exporter process has ended" in caplog.text
