"""OpenTelemetry traces of a turn, after the GenAI semantic conventions.

A turn is an `invoke_agent <agent>` span; each LLM call a `chat <model>` span under it (or
under the tool that made it); each tool call an `execute_tool <tool>` span; each sandbox
run a `sandbox.run` span under its tool. Spans carry `gen_ai.operation.name`,
`gen_ai.provider.name`, `gen_ai.request.model`, `gen_ai.usage.input_tokens` and
`output_tokens`, and `gen_ai.conversation.id`; prompt and completion text
(`gen_ai.input.messages`, `gen_ai.output.messages`) only with TRACE_CONTENT.

Parents are passed explicitly (a `TurnTrace` rides on the turn's LLM handle), never
through context variables across `yield`s: a turn's events are generators that resume
in whatever task reads them.

Tracing is on when the standard OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set, and off
otherwise: then every span is OpenTelemetry's no-op one, and `TurnTrace` makes none at all.
When on, it is the OpenTelemetry SDK as documented: a `TracerProvider` (its sampler, ids,
resource and limits from the OTEL_* variables), whose spans go through a
`BatchSpanProcessor` (OTEL_BSP_*) to the OTLP/HTTP `OTLPSpanExporter`
(OTEL_EXPORTER_OTLP_*), in a thread of the SDK's.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Sequence
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import NonRecordingSpan, Span, SpanKind, Status, StatusCode

__all__ = ["Span", "TurnTrace"]

logger = logging.getLogger(__name__)

SERVICE = "python-data-agent"
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


class _State:
    tracer: trace.Tracer | None = None  # None: tracing is off
    record_content = False
    provider: TracerProvider | None = None


def otlp_configured(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    if environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").lower() == "none":
        return False
    return any(environ.get(name) for name in _ENDPOINTS)


def configure_tracing(
    *, record_content: bool = False, processor: SpanProcessor | None = None
) -> bool:
    """Turn tracing on with `processor` (a test's), or with OTLP/HTTP when the environment
    names an endpoint; off otherwise. Whether it is on."""
    _State.record_content = record_content
    if processor is None and not otlp_configured():
        _State.tracer = None
        return False
    name = os.environ.get("OTEL_SERVICE_NAME") or SERVICE
    # The app's stop sends what is buffered (shutdown_tracing), not an atexit hook.
    provider = TracerProvider(
        resource=Resource.create({"service.name": name}), shutdown_on_exit=False
    )
    if processor is None:
        processor = BatchSpanProcessor(OTLPSpanExporter())
    provider.add_span_processor(processor)
    _State.provider = provider
    _State.tracer = provider.get_tracer(SERVICE)
    logger.info("Tracing on: spans go to %s", type(processor).__name__)
    return True


def shutdown_tracing() -> None:
    """Send what is buffered (the app's stop)."""
    provider, _State.provider = _State.provider, None
    _State.tracer = None
    if provider is not None:
        provider.shutdown()


def tracing_on() -> bool:
    return _State.tracer is not None


def get_tracer() -> trace.Tracer:
    """The tracer the server's spans come from (OpenTelemetry's no-op one while off)."""
    return _State.tracer or trace.NoOpTracer()


def current_trace_id() -> str | None:
    """The trace id of the span current in this context (the request's), as 32 hex digits."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def server_span(name: str, attributes: dict[str, Any]) -> contextlib.AbstractContextManager[Span]:
    """An HTTP request's span, current for the code that handles it (the middleware's); an
    exception that escapes is recorded on it."""
    tracer = _State.tracer
    if tracer is None:
        return contextlib.nullcontext(trace.INVALID_SPAN)
    return tracer.start_as_current_span(name, kind=SpanKind.SERVER, attributes=attributes)


class TurnTrace:
    """One turn's spans: `invoke_agent` and what happens under it. Inert when tracing is off.

    The `invoke_agent` span is begun when something happens under it, so a plain chat turn
    (no agent: one model call) is only its `chat` span, under the request's: a gateway's
    every request pays for one span, not two.
    """

    def __init__(
        self,
        agent: str,
        conversation_id: str,
        model: str,
        provider: str,
        parent: Context | None = None,
    ) -> None:
        self.conversation_id = conversation_id
        self.provider = provider
        self.model = model
        self.agent = agent
        self.root: Span | None = None
        self._stack: list[Span] = []
        self._parent: Context | None = None
        if _State.tracer is not None:  # the request's context, where the turn began
            self._parent = parent if parent is not None else otel_context.get_current()

    def _begin(self) -> None:
        tracer = _State.tracer
        if tracer is None or self.root is not None:
            return
        self.root = tracer.start_span(
            f"invoke_agent {self.agent}",
            context=self._parent,
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": self.agent,
                "gen_ai.provider.name": self.provider,
                "gen_ai.request.model": self.model,
                "gen_ai.conversation.id": self.conversation_id,
            },
        )
        self._stack = [self.root]

    def set_agent(self, agent: str) -> None:
        """The agent the router picked (the span may have begun before it chose)."""
        self.agent = agent
        if self.root is not None:
            self.root.update_name(f"invoke_agent {agent}")
            self.root.set_attribute("gen_ai.agent.name", agent)
        elif agent != "chat":
            self._begin()

    @property
    def trace_id(self) -> str | None:
        if self.root is None:
            return None
        return format(self.root.get_span_context().trace_id, "032x")

    def _child(self, name: str, kind: SpanKind, attributes: dict[str, Any]) -> Span:
        tracer = _State.tracer
        if tracer is None:
            return NonRecordingSpan(trace.INVALID_SPAN_CONTEXT)
        if self.agent != "chat":
            self._begin()
        # Plain chat: its one call is the request's child.
        parent = trace.set_span_in_context(self._stack[-1]) if self._stack else self._parent
        attributes = {"gen_ai.conversation.id": self.conversation_id, **attributes}
        return tracer.start_span(name, context=parent, kind=kind, attributes=attributes)

    def llm_call(self, stage: str, messages: Sequence[Any] = ()) -> Span:
        """A `chat` span for one LLM call (ended by `end_llm_call`)."""
        span = self._child(
            f"chat {self.model}",
            SpanKind.CLIENT,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": self.provider,
                "gen_ai.request.model": self.model,
                "pda.llm.stage": stage,
            },
        )
        if _State.record_content and span.is_recording() and messages:
            span.set_attribute("gen_ai.input.messages", _messages_json(messages))
        return span

    def end_llm_call(
        self,
        span: Span,
        *,
        input_tokens: int,
        output_tokens: int,
        reply: str,
        error: str | None,
        first_token: float | None = None,
    ) -> None:
        if span.is_recording():
            attributes: dict[str, Any] = {
                "gen_ai.response.model": self.model,
                "gen_ai.usage.input_tokens": input_tokens,
                "gen_ai.usage.output_tokens": output_tokens,
            }
            if first_token is not None:
                attributes["gen_ai.response.time_to_first_chunk"] = first_token
            if _State.record_content:
                output = [{"role": "assistant", "parts": [{"type": "text", "content": reply}]}]
                attributes["gen_ai.output.messages"] = json.dumps(output)
            span.set_attributes(attributes)
            _fail(span, error)
        span.end()

    @contextlib.contextmanager
    def tool(self, name: str, call_id: str = "") -> Iterator[Span]:
        """An `execute_tool` span, the parent of what the tool does meanwhile."""
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
        }
        if call_id:
            attributes["gen_ai.tool.call.id"] = call_id
        span = self._child(f"execute_tool {name}", SpanKind.INTERNAL, attributes)
        self._stack.append(span)
        try:
            yield span
        except BaseException as exc:
            _fail(span, type(exc).__name__)
            raise
        finally:
            self._stack.remove(span)
            span.end()

    @contextlib.contextmanager
    def sandbox_run(self) -> Iterator[Span]:
        """A `sandbox.run` span (its outcome is set by the caller)."""
        span = self._child("sandbox.run", SpanKind.INTERNAL, {})
        try:
            yield span
        finally:
            span.end()

    def end(self, outcome: str, input_tokens: int, output_tokens: int) -> None:
        root, self.root = self.root, None
        if root is None:
            return
        root.set_attributes(
            {
                "gen_ai.usage.input_tokens": input_tokens,
                "gen_ai.usage.output_tokens": output_tokens,
                "pda.turn.outcome": outcome,
            }
        )
        _fail(root, None if outcome == "answered" else outcome)
        root.end()


def _fail(span: Span, error: str | None) -> None:
    if error is not None and span.is_recording():
        span.set_attribute("error.type", error.split(":", 1)[0][:100])
        span.set_status(Status(StatusCode.ERROR, error[:500]))


def _messages_json(messages: Sequence[Any]) -> str:
    converted = [
        {
            "role": {"human": "user", "ai": "assistant"}.get(getattr(m, "type", ""), "system"),
            "parts": [{"type": "text", "content": str(getattr(m, "content", m))}],
        }
        for m in messages
    ]
    return json.dumps(converted)


class TraceIdFilter(logging.Filter):
    """Adds `trace_id` (the current span's, or `-`) to each record, for the log format."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.trace_id = current_trace_id() or "-"
        return True
