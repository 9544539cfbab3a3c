"""Spans handed to a child process, which encodes them and sends them over OTLP/HTTP.

With 64 streams on two cores the server's one thread is the bottleneck, and what it spends
on tracing shows almost one for one in every request's time. Encoding and sending in a
thread of its own would still take that thread's turns at the GIL (~40 µs a request). So
the server only flattens each ended span into a tuple of plain values, and a thread of its
sends them in batches, as `marshal` data through a pipe, to `export_worker` (~3 µs a span):
the child rebuilds the spans and exports them with `FastOTLPSpanExporter`, reading the
standard OTEL_EXPORTER_OTLP_* variables itself.

Batching is the SDK batch processor's, from the same variables: a batch every
OTEL_BSP_SCHEDULE_DELAY ms, or as soon as OTEL_BSP_MAX_EXPORT_BATCH_SIZE spans wait; at most
OTEL_BSP_MAX_QUEUE_SIZE wait (then the oldest are dropped). A child that dies is started
again (at most every 10 s); the spans it had not sent are lost, as telemetry may be.

The pipe carries only what this process wrote, to a child of its own: no other process's
data is ever unmarshalled.
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import os
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, Any

from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

logger = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]  # where `backend` can be imported from
FRAME = struct.Struct("<I")  # each frame's length, then its marshal data
RESTART_AFTER = 10.0  # seconds at least from one child's start to the next's


def _setting(name: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(name, default)))
    except ValueError:
        return default


def flatten(span: ReadableSpan) -> tuple[Any, ...]:
    """An ended span as plain values (`export_worker.rebuild` makes it a span again)."""
    context = span.get_span_context()
    assert context is not None  # an ended span always has one
    parent = span.parent
    scope = span.instrumentation_scope
    status = span.status
    return (
        span.name,
        context.trace_id,
        context.span_id,
        int(context.trace_flags),
        tuple(context.trace_state.items()) if context.trace_state else (),
        None if parent is None else (parent.trace_id, parent.span_id, parent.is_remote),
        span.kind.value,
        span.start_time,
        span.end_time,
        dict(span.attributes or {}),
        tuple((e.name, e.timestamp, dict(e.attributes or {})) for e in span.events),
        tuple(
            (
                link.context.trace_id,
                link.context.span_id,
                link.context.is_remote,
                dict(link.attributes or {}),
            )
            for link in span.links
        ),
        status.status_code.value,
        status.description,
        (span.dropped_attributes, span.dropped_events, span.dropped_links),
        None if scope is None else (scope.name, scope.version, scope.schema_url),
    )


class HandoverSpanProcessor(SpanProcessor):
    """Ended, sampled spans to `export_worker`, in batches, from a thread of its own."""

    def __init__(self, resource: Resource) -> None:
        self._header = marshal.dumps(
            {"resource": dict(resource.attributes), "schema_url": resource.schema_url}
        )
        self._delay = _setting("OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000
        self._batch = _setting("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)
        self._queue: deque[tuple[Any, ...]] = deque(
            maxlen=_setting("OTEL_BSP_MAX_QUEUE_SIZE", 2048)
        )
        self._wake = threading.Event()
        self._sending = threading.Lock()
        self._stopping = False  # no more spans taken
        self._closed = False  # no more children started
        self._child: subprocess.Popen[bytes] | None = None
        self._start_child()
        self._thread = threading.Thread(target=self._run, name="span-handover", daemon=True)
        self._thread.start()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        context = span.get_span_context()
        if self._stopping or context is None or not context.trace_flags.sampled:
            return
        self._queue.append(flatten(span))
        if len(self._queue) >= self._batch:
            self._wake.set()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Everything waiting is handed to the child (which sends it within its own time)."""
        return self._send_all()

    def shutdown(self) -> None:
        """Hands over what waits, then waits for the child to send it and end."""
        self._stopping = True
        self._wake.set()
        self._thread.join(timeout=30)
        self._send_all()
        self._closed = True
        child, self._child = self._child, None
        if child is not None:
            _close(child.stdin)
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.wait(self._delay)
            self._wake.clear()
            self._send_all()

    def _send_all(self) -> bool:
        with self._sending:
            while self._queue:
                count = min(len(self._queue), self._batch)
                batch = [self._queue.popleft() for _ in range(count)]
                if not self._write(marshal.dumps(batch)):
                    return False
        return True

    def _write(self, data: bytes) -> bool:
        child = self._child
        if child is None or child.poll() is not None:
            child = self._restart()
            if child is None:
                return False  # this batch is dropped
        if not _send(child, data):
            logger.warning("The span exporter process ended; a batch of spans is lost")
            return False
        return True

    def _restart(self) -> subprocess.Popen[bytes] | None:
        if self._closed or time.monotonic() - self._started < RESTART_AFTER:
            logger.warning("The span exporter process has ended; a batch of spans is lost")
            return None
        if self._child is not None:
            _close(self._child.stdin)
            ended = self._child.wait()
            logger.warning("The span exporter process ended (%s); starting another", ended)
        self._start_child()
        return self._child

    def _start_child(self) -> None:
        self._child = subprocess.Popen(
            [sys.executable, "-m", "backend.observability.export_worker"],
            stdin=subprocess.PIPE,
            cwd=ROOT,
            start_new_session=True,  # a terminal's Ctrl-C is the server's to handle
        )
        self._started = time.monotonic()
        _send(self._child, self._header)  # a child that died at once: the next write sees it

    @property
    def child_pid(self) -> int | None:
        return self._child.pid if self._child is not None else None


def _send(child: subprocess.Popen[bytes], data: bytes) -> bool:
    """One frame to `child`; whether its pipe took it."""
    assert child.stdin is not None
    try:
        child.stdin.write(FRAME.pack(len(data)) + data)
        child.stdin.flush()
    except (OSError, ValueError):  # a broken or closed pipe
        return False
    return True


def _close(stream: IO[bytes] | None) -> None:
    if stream is not None:
        with contextlib.suppress(OSError):
            stream.close()
