"""Spans at the price of a dict: OpenTelemetry's API, sampler and export, without the SDK's
per-span machinery.

The SDK's span costs the server about 40 µs of CPU to make and end (each attribute checked
through a locked, bounded mapping, a copy of the whole span at its end), and a plain `/v1`
chat makes two: with 64 streams on two cores that alone was a few per cent of every
request's time. A `LeanTracer` makes `LeanSpan`s instead. A `LeanSpan` is an
`opentelemetry.trace.Span` for the code that records, and a `ReadableSpan` for the SDK's
span processors and exporters, which take it as it is when it ends (it cannot change
after). What decides and identifies stays the SDK's, read from the standard OTEL_*
variables by a `TracerProvider`: the sampler, the id generator, the resource and the
attribute limits.

Attributes are kept as the SDK's `BoundedAttributes` keeps them (the count limit drops the
oldest, a key set again moves to the end), but a str, bool, int or float is stored as it
is; anything else goes through the SDK's own check (a sequence becomes a tuple, an unknown
type its `str`).
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from opentelemetry import trace
from opentelemetry.attributes import _clean_attribute_value
from opentelemetry.context import Context
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util import types

__all__ = ["LeanSpan", "LeanTracer"]

_PLAIN = frozenset({str, bool, int, float})
_UNSET = Status(StatusCode.UNSET)
_SAMPLE = Decision.RECORD_AND_SAMPLE


class LeanTracer(trace.Tracer):
    """Makes `LeanSpan`s, ended into `processor`; sampler, ids and resource `provider`'s."""

    def __init__(self, provider: TracerProvider, processor: SpanProcessor, scope: str) -> None:
        self.sampler = provider.sampler
        self.ids = provider.id_generator
        self.resource = provider.resource
        self.processor = processor
        self.scope = InstrumentationScope(scope)
        limits = SpanLimits()  # OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT and the like
        self.max_attributes = limits.max_span_attributes
        self.max_length = limits.max_span_attribute_length

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[trace.Link] | None = (),
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        parent: SpanContext | None = trace.get_current_span(context).get_span_context()
        if parent is None or not parent.is_valid:
            parent = None
            trace_id = self.ids.generate_trace_id()
            random_id = self.ids.is_trace_id_random()
        else:
            trace_id = parent.trace_id
            random_id = parent.trace_flags.random_trace_id
        links = links or ()
        sampled = self.sampler.should_sample(context, trace_id, name, kind, attributes, links)
        flags = TraceFlags.SAMPLED if sampled.decision is _SAMPLE else TraceFlags.DEFAULT
        if random_id:
            flags |= TraceFlags.RANDOM_TRACE_ID
        span_context = SpanContext(
            trace_id,
            self.ids.generate_span_id(),
            is_remote=False,
            trace_flags=TraceFlags(flags),
            trace_state=sampled.trace_state,
        )
        if sampled.decision is Decision.DROP:
            return trace.NonRecordingSpan(span_context)
        span = LeanSpan(self, name, span_context, parent, kind, links, start_time)
        if sampled.attributes:
            span.set_attributes(sampled.attributes)
        if attributes:
            span.set_attributes(attributes)
        # The SDK's processors take a Span of theirs here; none reads more than the API's.
        self.processor.on_start(span, parent_context=context)  # type: ignore[arg-type]
        return span

    @contextlib.contextmanager
    def start_as_current_span(  # type: ignore[override]
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: Sequence[trace.Link] | None = (),
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[trace.Span]:
        span = self.start_span(name, context, kind, attributes, links, start_time)
        with trace.use_span(
            span,
            end_on_exit=end_on_exit,
            record_exception=record_exception,
            set_status_on_exception=set_status_on_exception,
        ) as current:
            yield current


class LeanSpan(trace.Span, ReadableSpan):
    """A span that records into plain fields, and is its own `ReadableSpan` once ended."""

    def __init__(
        self,
        tracer: LeanTracer,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        kind: SpanKind,
        links: Sequence[trace.Link],
        start_time: int | None,
    ) -> None:
        # ReadableSpan's fields, set here rather than through its constructor.
        self._name = name
        self._context = context
        self._span_context = context  # the same, typed as the API has it
        self._parent = parent
        self._kind = kind
        self._attributes: dict[str, Any] = {}
        self._events: list[Event] = []
        self._links = tuple(links)
        self._resource = tracer.resource
        self._instrumentation_scope = tracer.scope
        self._instrumentation_info = None
        self._status = _UNSET
        self._start_time = start_time or time.time_ns()
        self._end_time: int | None = None
        self._tracer = tracer
        self._dropped = 0

    @property
    def dropped_attributes(self) -> int:
        return self._dropped

    def get_span_context(self) -> SpanContext:
        return self._span_context

    def is_recording(self) -> bool:
        return self._end_time is None

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        if self._end_time is None:
            self._put(self._attributes, key, value)

    def set_attributes(self, attributes: Mapping[str, types.AttributeValue]) -> None:
        if self._end_time is None:
            for key, value in attributes.items():
                self._put(self._attributes, key, value)

    def _put(self, into: dict[str, Any], key: str, value: Any) -> None:
        # As the SDK's BoundedAttributes: a key set again moves to the end; when full,
        # the oldest goes.
        tracer = self._tracer
        if type(value) not in _PLAIN or (tracer.max_length is not None and type(value) is str):
            value = _clean_attribute_value(value, tracer.max_length)
        if not key or type(key) is not str:
            self._dropped += 1
            return
        if key in into:
            del into[key]
        elif tracer.max_attributes is not None and len(into) >= tracer.max_attributes:
            if not tracer.max_attributes:
                self._dropped += 1
                return
            del into[next(iter(into))]
            self._dropped += 1
        into[key] = value

    def update_name(self, name: str) -> None:
        if self._end_time is None:
            self._name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        # As the SDK: OK is final, and UNSET changes nothing.
        if self._end_time is not None or self._status.status_code is StatusCode.OK:
            return
        if isinstance(status, StatusCode):
            status = Status(status, description)
        if status.status_code is not StatusCode.UNSET:
            self._status = status

    def add_event(
        self, name: str, attributes: types.Attributes = None, timestamp: int | None = None
    ) -> None:
        if self._end_time is None:
            cleaned: dict[str, Any] = {}
            for key, value in (attributes or {}).items():
                self._put(cleaned, key, value)
            self._events.append(Event(name, cleaned, timestamp or time.time_ns()))

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        kind = type(exception)
        module = kind.__module__
        recorded: dict[str, Any] = {
            "exception.type": f"{module}.{kind.__qualname__}"
            if module and module != "builtins"
            else kind.__qualname__,
            "exception.message": str(exception),
            "exception.stacktrace": "".join(traceback.format_exception(exception)),
            "exception.escaped": str(escaped),
        }
        recorded.update(attributes or {})
        self.add_event("exception", recorded, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self._end_time is not None:
            return
        self._end_time = end_time or time.time_ns()
        self._tracer.processor.on_end(self)
