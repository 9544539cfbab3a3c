"""The span exporter process: `python -m backend.observability.export_worker`, started by
`handover.HandoverSpanProcessor`, its spans on standard input.

Frames are a 4-byte length and `marshal` data: first the resource, then batches of
flattened spans. Each batch is rebuilt into spans and sent with `FastOTLPSpanExporter`
(its endpoint, headers, compression and retries from the OTEL_EXPORTER_OTLP_* variables).
It ends when its input does, after sending what it has. It reads only its parent's pipe.
"""

from __future__ import annotations

import logging
import marshal
import signal
import sys
from collections.abc import Iterator
from typing import IO, Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.trace.span import TraceState

from backend.observability.handover import FRAME
from backend.observability.otlp import FastOTLPSpanExporter

logger = logging.getLogger("backend.observability.export_worker")


class _Received(ReadableSpan):
    """A span as the server ended it, with the counts it had dropped."""

    def __init__(self, dropped: tuple[int, int, int], **fields: Any) -> None:
        super().__init__(**fields)
        self._dropped_counts = dropped

    @property
    def dropped_attributes(self) -> int:
        return self._dropped_counts[0]

    @property
    def dropped_events(self) -> int:
        return self._dropped_counts[1]

    @property
    def dropped_links(self) -> int:
        return self._dropped_counts[2]


def rebuild(flat: tuple[Any, ...], resource: Resource) -> ReadableSpan:
    """`handover.flatten`'s tuple, a span again."""
    (
        name,
        trace_id,
        span_id,
        flags,
        state,
        parent,
        kind,
        start,
        end,
        attributes,
        events,
        links,
        code,
        description,
        dropped,
        scope,
    ) = flat
    context = SpanContext(
        trace_id,
        span_id,
        is_remote=False,
        trace_flags=TraceFlags(flags),
        trace_state=TraceState(state),
    )
    parent_context = None
    if parent is not None:
        parent_trace, parent_span, remote = parent
        parent_context = SpanContext(parent_trace, parent_span, is_remote=remote)
    return _Received(
        dropped,
        name=name,
        context=context,
        parent=parent_context,
        resource=resource,
        attributes=attributes,
        events=[Event(event, attrs, timestamp) for event, timestamp, attrs in events],
        links=[Link(SpanContext(t, s, is_remote=r), attrs) for t, s, r, attrs in links],
        kind=SpanKind(kind),
        status=Status(StatusCode(code), description),
        start_time=start,
        end_time=end,
        instrumentation_scope=None if scope is None else InstrumentationScope(*scope),
    )


def frames(stream: IO[bytes]) -> Iterator[Any]:
    """Each frame's value, until the stream ends (a frame cut short ends it too)."""
    while True:
        head = stream.read(FRAME.size)
        if len(head) < FRAME.size:
            return
        (length,) = FRAME.unpack(head)
        data = stream.read(length)
        if len(data) < length:
            return
        yield marshal.loads(data)


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # The server stops this process by closing its input, after the last batch; a signal
    # meant for the server's group must not cut that short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stream = sys.stdin.buffer
    received = frames(stream)
    header = next(received, None)
    if header is None:
        return 0
    resource = Resource(header["resource"], header["schema_url"])
    exporter = FastOTLPSpanExporter()
    try:
        for batch in received:
            exporter.export([rebuild(flat, resource) for flat in batch])
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    return 0


if __name__ == "__main__":
    sys.exit(main())
