"""OTLP/HTTP export of spans, with an encoder written for the spans this server makes.

OpenTelemetry's own exporter builds a protobuf object for every span, attribute and value
before it serialises them: about 45 µs of CPU per span, more than making the span (this
runs in the export process: handover.py). This one writes the same wire format straight
to bytes and keeps the bytes of the attributes it has seen (most repeat: a model, a stage,
an operation name), so a span costs about 10 µs. A span it has no fast path for (with
events or links) is encoded by OpenTelemetry's own encoder, and so is a value that is not
a string or a number; their bytes are joined to the rest, as protobuf's repeated fields are
their items one after another.

Everything else (endpoint, headers, compression, TLS, retries, the size limit) is the
OTLP/HTTP exporter's, from the standard OTEL_EXPORTER_OTLP_* variables.
"""

from __future__ import annotations

import logging
import struct
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common._internal import (
    _encode_instrumentation_scope,
    _encode_key_value,
    _encode_resource,
)
from opentelemetry.exporter.otlp.proto.common._internal.trace_encoder import (
    _SPAN_KIND_MAP,
    _encode_span,
)
from opentelemetry.exporter.otlp.proto.http._common import (
    RequestPayloadTooLargeError,
    _is_request_too_large,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.trace.v1.trace_pb2 import SpanFlags
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import Status

__all__ = ["FastOTLPSpanExporter", "encode_request"]

logger = logging.getLogger(__name__)

CACHED = 4096  # attributes' bytes kept; the cache starts again when it is full
_FIXED64 = struct.Struct("<Q")
_FIXED32 = struct.Struct("<I")
_DOUBLE = struct.Struct("<d")
_INT64 = range(-(1 << 63), 1 << 63)


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64 on the wire: two's complement, ten bytes
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field (a string, bytes or a message)."""
    return tag + _varint(len(payload)) + payload


def _text(tag: bytes, text: str) -> bytes:
    return _field(tag, text.encode("utf-8", "replace"))


# Span's fields (opentelemetry/proto/trace/v1/trace.proto), as tags.
_TRACE_ID, _SPAN_ID, _TRACE_STATE = b"\x0a\x10", b"\x12\x08", b"\x1a"
_PARENT_ID, _NAME, _START, _END = b"\x22\x08", b"\x2a", b"\x39", b"\x41"
_ATTRIBUTE, _STATUS, _FLAGS = b"\x4a", b"\x7a", b"\x85\x01"
_DROPPED = (b"\x50", b"\x60", b"\x70")  # attributes, events, links
_HAS_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK
_IS_REMOTE = SpanFlags.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
_IDS = struct.Struct(">BBQQBBQ")  # trace_id (16 bytes) and span_id (8), each a field
_PARENT = struct.Struct(">BBQ")
_TIMES = struct.Struct("<BQBQ")  # start and end: fixed64, little-endian as protobuf's
_LOW64 = (1 << 64) - 1
_LOCAL = _FLAGS + _FIXED32.pack(_HAS_IS_REMOTE)
_REMOTE = _FLAGS + _FIXED32.pack(_HAS_IS_REMOTE | _IS_REMOTE)
_KIND = {kind: b"\x30" + _varint(number) for kind, number in _SPAN_KIND_MAP.items()}


class _Attributes:
    """Each (key, value)'s KeyValue bytes, as a span's attribute field."""

    def __init__(self) -> None:
        self.cache: dict[tuple[Any, ...], bytes] = {}

    def constant(self, tag: bytes, text: str) -> bytes:
        """A string field that repeats (a span's name)."""
        return self._cached((tag, text), lambda: _text(tag, text))

    def status(self, status: Status) -> bytes:
        """A span's `Status` field."""

        def encode() -> bytes:
            message = _text(b"\x12", status.description) if status.description else b""
            code = status.status_code.value
            return _field(_STATUS, message + (b"\x18" + _varint(code) if code else b""))

        return self._cached((status.status_code, status.description), encode)

    def _cached(self, slot: tuple[Any, ...], encode: Callable[[], bytes]) -> bytes:
        try:
            return self.cache[slot]
        except KeyError:
            if len(self.cache) >= CACHED:
                self.cache.clear()
            encoded = self.cache[slot] = encode()
            return encoded

    def __call__(self, key: str, value: Any) -> bytes:
        slot = (key, type(value), value)
        try:
            return self.cache[slot]
        except KeyError:
            pass
        except TypeError:  # an unhashable value
            return _field(_ATTRIBUTE, _key_value(key, value))
        if len(self.cache) >= CACHED:
            self.cache.clear()
        encoded = self.cache[slot] = _field(_ATTRIBUTE, _key_value(key, value))
        return encoded


def _key_value(key: str, value: Any) -> bytes:
    if isinstance(value, bool):
        any_value = b"\x10\x01" if value else b"\x10\x00"
    elif isinstance(value, str):
        any_value = _text(b"\x0a", value)
    elif isinstance(value, int) and value in _INT64:
        any_value = b"\x18" + _varint(value)
    elif isinstance(value, float):
        any_value = b"\x21" + _DOUBLE.pack(value)
    else:
        return _serialized(_encode_key_value(key, value))
    return _text(b"\x0a", key) + _field(b"\x12", any_value)


def _serialized(message: Any) -> bytes:
    """A message of OpenTelemetry's own encoder, as bytes."""
    return bytes(message.SerializePartialToString())


def encode_span(span: ReadableSpan, attribute: _Attributes) -> bytes:
    """One `Span` message, as OpenTelemetry's encoder writes it (less field order)."""
    if span.events or span.links:
        return _serialized(_encode_span(span))
    context = span.get_span_context()
    assert context is not None  # an SDK span always has one
    parent = span.parent
    parts = [
        _IDS.pack(
            0x0A, 16, context.trace_id >> 64, context.trace_id & _LOW64, 0x12, 8, context.span_id
        )
    ]
    if context.trace_state:
        state = ",".join(f"{key}={value}" for key, value in context.trace_state.items())
        parts.append(_text(_TRACE_STATE, state))
    if parent is not None:
        parts.append(_PARENT.pack(0x22, 8, parent.span_id))
    parts.append(attribute.constant(_NAME, span.name))
    parts.append(_KIND[span.kind])
    parts.append(_TIMES.pack(0x39, span.start_time or 0, 0x41, span.end_time or 0))
    parts += [attribute(key, value) for key, value in (span.attributes or {}).items()]
    dropped = (span.dropped_attributes, span.dropped_events, span.dropped_links)
    if any(dropped):
        parts += [tag + _varint(n) for tag, n in zip(_DROPPED, dropped, strict=True) if n]
    parts.append(attribute.status(span.status))
    parts.append(_REMOTE if parent is not None and parent.is_remote else _LOCAL)
    return b"".join(parts)


def encode_request(spans: Sequence[ReadableSpan], attribute: _Attributes | None = None) -> bytes:
    """An `ExportTraceServiceRequest`: the spans by resource, then by instrumentation scope."""
    attribute = attribute or _Attributes()
    # By identity: a Resource's hash is a JSON dump of its attributes, and every span
    # of a provider shares its one Resource.
    grouped: dict[int, tuple[Resource, defaultdict[Any, list[bytes]]]] = {}
    for span in spans:
        resource = span.resource
        _, scopes = grouped.setdefault(id(resource), (resource, defaultdict(list)))
        scopes[span.instrumentation_scope or None].append(encode_span(span, attribute))
    request = []
    for resource, scopes in grouped.values():
        body = [_field(b"\x0a", _encode_resource(resource).SerializePartialToString())]
        for scope, encoded in scopes.items():
            header = _encode_instrumentation_scope(scope).SerializePartialToString()
            scoped = [_field(b"\x0a", header)]
            scoped += [_field(b"\x12", span) for span in encoded]
            if scope is not None and scope.schema_url:
                scoped.append(_text(b"\x1a", scope.schema_url))
            body.append(_field(b"\x12", b"".join(scoped)))
        if resource.schema_url:
            body.append(_text(b"\x1a", resource.schema_url))
        request.append(_field(b"\x0a", b"".join(body)))
    return b"".join(request)


class FastOTLPSpanExporter(OTLPSpanExporter):
    """The OTLP/HTTP span exporter, with `encode_request` in place of its encoder."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._attribute = _Attributes()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        # As OTLPSpanExporter.export (opentelemetry-exporter-otlp-proto-http 1.45), but for
        # the encoder.
        if self._shutdown:
            logger.warning("Exporter already shutdown, ignoring batch")
            return SpanExportResult.FAILURE
        with self._metrics.export_operation(len(spans)) as result:
            try:
                data = encode_request(spans, self._attribute)
            except Exception as error:  # one bad batch must not stop the next
                logger.error("Failed to encode span batch: %s", error)
                result.error = error
                return SpanExportResult.FAILURE
            if _is_request_too_large(data, self._max_request_size):
                logger.warning(
                    "Dropping span batch: serialized size %d bytes exceeds max_request_size %d.",
                    len(data),
                    self._max_request_size,
                )
                result.error = RequestPayloadTooLargeError(f"{len(data)} bytes")
                return SpanExportResult.FAILURE
            outcome = self._client.export(data)
            if not outcome.success:
                result.error = outcome.error
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS
