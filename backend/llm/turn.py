"""A turn's LLM client: plain or JSON replies, counted and logged.

Every stage of a turn (the router, the planner, ReAct, and the coder's select,
generate, review, fix, answer and TDD steps) calls the model through `TurnLLM`,
so each prompt and reply reaches the prompt log with its stage and agent, and a
run can report how many calls and tokens it took. Structured
replies use the backend's JSON-schema-constrained decoding where it has one
(llama.cpp grammars, Ollama's `format`); otherwise the JSON is dug out of the
text, which is what small models need anyway.

A turn may have a `head`: the messages every one of its prompts starts with, in
the same bytes (the system prompt with the tools, rules and file metadata, then
the conversation so far). It stands in for each stage's own system prompt, so
the model's server reuses its cached prefix from one call to the next and only
processes the stage's own instruction anew. Each call also asks the backend for
that reuse where it has a switch for it (`LLMBackend.cache_kwargs`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractContextManager, aclosing, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from pydantic import BaseModel, ValidationError

from backend.llm import GenerationOptions, LLMBackend
from backend.llm.context import (
    ContextFitted,
    ContextOverflow,
    Measured,
    cut_notice,
    fit_prompt,
    trimmed_notice,
)
from backend.llm.errors import LLMError
from backend.llm.json_values import json_values
from backend.llm.profile import ModelProfile
from backend.observability.metrics import (
    LLM_CALLS,
    LLM_FIRST_TOKEN_SECONDS,
    LLM_SECONDS,
    LLM_TOKENS,
    model_label,
)
from backend.observability.tracing import TurnTrace
from backend.storage.audit import AuditLog

T = TypeVar("T", bound=BaseModel)
logger = logging.getLogger(__name__)

Agent = Literal["router", "plan_execute", "react", "python_coder", "openinterpreter"]
Stage = Literal[
    "route",
    "plan",
    "replan",
    "final",
    "react",
    "select_files",
    "analysis_spec",
    "generate",
    "review",
    "modify",
    "fix",
    "answer",
    "tdd_specs",
    "tdd_tests",
    "tdd_implement",
    "tdd_fix",
    "openinterpreter",
    "tool_arguments",
]
# Whose prompt each stage is (the prompt log's `agent_type`); every other stage is the coder's.
_AGENT_OF_STAGE: dict[Stage, Agent] = {
    "route": "router",
    "plan": "plan_execute",
    "replan": "plan_execute",
    "final": "plan_execute",
    "react": "react",
    "openinterpreter": "openinterpreter",
}
# Replies longer than this are a model rambling, not code: cap them per stage.
_MAX_TOKENS: dict[Stage, int] = {
    "review": 256,
    "select_files": 300,
    "answer": 500,
    "analysis_spec": 60,
}
_DEFAULT_MAX_TOKENS = 1024


class StructuredReplyError(Exception):
    """The model's reply is not JSON matching the schema."""


class LLMCallLimit(Exception):
    """The turn has made as many model calls as it may (AGENT_MAX_LLM_CALLS)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"this turn has used its {limit} LLM calls (AGENT_MAX_LLM_CALLS)")
        self.limit = limit


class Reply:
    """A call's reply as it arrives: its text, and when its first piece came."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.parts: list[str] = []
        self.first_token: float | None = None  # seconds from the start

    def add(self, text: str) -> None:
        if self.first_token is None and text:
            self.first_token = time.perf_counter() - self.started
        self.parts.append(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started


def record_llm_call(
    stage: str, model: str, reply: Reply, prompt: int, completion: int, error: str | None
) -> None:
    """One call in the metrics: its outcome, time, first token (streams) and tokens."""
    label = model_label(model)
    outcome = "ok" if error is None else "cancelled" if error == "cancelled" else "error"
    LLM_CALLS.labels(stage, label, outcome).inc()
    LLM_SECONDS.labels(stage, label).observe(reply.seconds)
    if reply.first_token is not None:
        LLM_FIRST_TOKEN_SECONDS.labels(stage, label).observe(reply.first_token)
    if prompt:
        LLM_TOKENS.labels(stage, label, "prompt").inc(prompt)
    if completion:
        LLM_TOKENS.labels(stage, label, "completion").inc(completion)


@dataclass
class LLMUsage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class TurnLLM:
    """The turn's one LLM client, built complete (`dataclasses.replace` derives another
    that shares its usage and trace)."""

    backend: LLMBackend
    model: BaseChatModel
    model_name: str
    audit: AuditLog | None = None
    user: str = ""
    session_id: str = ""
    call_kwargs: dict[str, Any] = field(default_factory=dict)
    usage: LLMUsage = field(default_factory=LLMUsage)
    max_calls: int | None = None  # past it every call raises `LLMCallLimit`
    head: list[BaseMessage] = field(default_factory=list)  # what every prompt starts with
    trace: TurnTrace | None = None  # the turn's spans (backend/observability/tracing.py)
    question: str = ""  # the turn's question: never left out of a prompt fitted to the window
    # Shows a `ContextFitted` in the turn (set by the agent runner); else it is only logged.
    report: Callable[[ContextFitted], None] | None = None
    # What this model can do (`LLMBackend.abilities`); None: the backend's own profile.
    model_profile: ModelProfile | None = None

    @classmethod
    def for_backend(
        cls,
        backend: LLMBackend,
        model_name: str,
        audit: AuditLog | None = None,
        *,
        user: str = "",
        session_id: str = "",
        profile: ModelProfile | None = None,
        trace: TurnTrace | None = None,
    ) -> TurnLLM:
        return cls(
            backend=backend,
            model=backend.chat_model(model_name),
            model_name=model_name,
            audit=audit,
            user=user,
            session_id=session_id,
            model_profile=profile,
            trace=trace,
        )

    def tool_span(self, name: str) -> AbstractContextManager[Any]:
        """An `execute_tool` span (under the turn's) for what the tool does meanwhile."""
        return self.trace.tool(name) if self.trace is not None else nullcontext()

    def sandbox_span(self) -> AbstractContextManager[Any]:
        """A `sandbox.run` span under the tool that runs code."""
        return self.trace.sandbox_run() if self.trace is not None else nullcontext()

    @property
    def profile(self) -> ModelProfile:
        return self.model_profile or self.backend.profile

    def _limits(self, stage: Stage, max_tokens: int | None) -> dict[str, Any]:
        limit = max_tokens or _MAX_TOKENS.get(stage, _DEFAULT_MAX_TOKENS)
        cap = self.profile.max_tokens
        if stage == "answer" and self.profile.answer_tokens is not None:
            cap = self.profile.answer_tokens
        if cap is not None:
            limit = min(limit, cap)
        return self.backend.call_kwargs(GenerationOptions(max_tokens=limit))

    def messages(self, system: str, prompt: str) -> list[BaseMessage]:
        """A stage's prompt after the turn's head, or after its own `system` when there is none."""
        if self.head:
            return [*self.head, HumanMessage(prompt)]
        return _messages(system, prompt)

    async def text(
        self, stage: Stage, system: str, prompt: str, max_tokens: int | None = None
    ) -> str:
        """One plain reply to `prompt`."""
        return await self.ask(stage, self.messages(system, prompt), max_tokens)

    async def ask(
        self, stage: Stage, messages: list[BaseMessage], max_tokens: int | None = None
    ) -> str:
        """One plain reply to a conversation (a stage that continues an earlier one)."""
        return await self._call(stage, messages, self._limits(stage, max_tokens))

    async def chat(self, stage: Stage, messages: list[BaseMessage]) -> str:
        """One plain reply to a whole conversation, with no cap of the stage's."""
        return await self._call(stage, messages, {})

    async def json(
        self, stage: Stage, system: str, prompt: str, schema: type[T], max_tokens: int | None = None
    ) -> T:
        """A reply parsed into `schema`; raises `StructuredReplyError` if it is not one."""
        return await self.ask_json(stage, self.messages(system, prompt), schema, max_tokens)

    async def json_object(
        self, stage: Stage, system: str, prompt: str, schema: dict[str, Any]
    ) -> dict[str, Any]:
        """A reply that is a JSON object, decoded under `schema` (a JSON schema) where the
        backend can; raises `StructuredReplyError` when the reply holds no object."""
        try:
            constrained = self.backend.structured_kwargs(schema) or {}
        except Exception:  # a schema the backend cannot turn into a grammar: ask unconstrained
            constrained = {}
        constrained.update(self._limits(stage, None))
        reply = await self._call(stage, self.messages(system, prompt), constrained)
        for candidate in json_values(reply):
            if isinstance(candidate, dict):
                return candidate
        raise StructuredReplyError("the reply is not a JSON object")

    async def ask_json(
        self,
        stage: Stage,
        messages: list[BaseMessage],
        schema: type[T],
        max_tokens: int | None = None,
    ) -> T:
        """`json` for a conversation."""
        constrained = self.backend.structured_kwargs(schema.model_json_schema()) or {}
        constrained.update(self._limits(stage, max_tokens))
        reply = await self._call(stage, messages, constrained)
        return parse_json_reply(reply, schema)

    async def stream(
        self, stage: Stage, messages: list[BaseMessage], max_tokens: int | None = None
    ) -> AsyncGenerator[str, None]:
        """The reply's text as the model generates it; counted and logged like any call."""
        extra = self._limits(stage, max_tokens)
        messages, measured = await self.fitted(stage, messages, extra)
        async with (
            self._logged(stage, messages, measured) as reply,
            aclosing(self._chunks(messages, extra)) as chunks,
        ):
            async for chunk in chunks:
                self._count(chunk)
                if text := str(chunk.text):
                    reply.add(text)
                    yield text

    async def _call(self, stage: Stage, messages: list[BaseMessage], extra: dict[str, Any]) -> str:
        messages, measured = await self.fitted(stage, messages, extra)
        async with self._logged(stage, messages, measured) as reply:
            try:
                message = await self.model.ainvoke(messages, **self._kwargs(extra, cache=True))
            except Exception as exc:
                if not self.backend.refuses_cache_hint(exc):
                    raise
                message = await self.model.ainvoke(messages, **self._kwargs(extra, cache=False))
            reply.add(str(message.text))
            self._count(message)
        return reply.text

    async def _chunks(
        self, messages: list[BaseMessage], extra: dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        """The model's stream, started again without the cache hint if the server refuses it."""
        started = False
        try:
            async for chunk in self.model.astream(messages, **self._kwargs(extra, cache=True)):
                started = True
                yield chunk
            return
        except Exception as exc:
            if started or not self.backend.refuses_cache_hint(exc):
                raise
        async for chunk in self.model.astream(messages, **self._kwargs(extra, cache=False)):
            yield chunk

    def _kwargs(self, extra: dict[str, Any], *, cache: bool) -> dict[str, Any]:
        hint = self.backend.cache_kwargs() if cache else {}
        return {**self.call_kwargs, **hint, **extra}

    async def fitted(
        self, stage: Stage, messages: list[BaseMessage], extra: dict[str, Any]
    ) -> tuple[list[BaseMessage], Measured]:
        """`messages` fitted into the model's window with room for the answer
        (`backend/llm/context.py`); a prompt whose fixed parts do not fit is a 400."""
        window = await self.backend.context_window(self.model_name)
        count, exact = self.backend.token_counter
        tools = extra.get("tools") or self.call_kwargs.get("tools")
        try:
            fit, measured = fit_prompt(
                messages,
                window,
                count,
                exact,
                wanted=_answer_cap(extra),
                tools=tools,
                question=self.question,
            )
        except ContextOverflow as exc:
            raise LLMError(
                f"This prompt does not fit the model's context window: {exc}. Shorten the "
                "question, use fewer files, or raise the window (OLLAMA_NUM_CTX, "
                "EMBEDDED_CONTEXT_SIZE or LLM_CONTEXT_WINDOW).",
                status_code=400,
                code="context_length_exceeded",
            ) from None
        if fit.trimmed:
            notice = trimmed_notice(stage, window, fit, measured.tokens)
            logger.info("%s (stage %s, session %s)", notice.message, stage, self.session_id)
            if self.report is not None:
                self.report(notice)
        return fit.messages, measured

    def _check_read(self, stage: Stage, measured: Measured, reported: int) -> None:
        """Says so when the server read less of the prompt than was sent."""
        if not measured.cut_by(reported):
            return
        event = cut_notice(stage, measured.window, measured.tokens, reported)
        logger.warning("%s (stage %s, model %s)", event.message, stage, self.model_name)
        if self.report is not None:
            self.report(event)

    @asynccontextmanager
    async def _logged(
        self, stage: Stage, messages: list[BaseMessage], measured: Measured | None = None
    ) -> AsyncGenerator[Reply, None]:
        """One model call: refused past the turn's limit, then counted, measured, traced and
        logged however it ends; the caller adds the reply's text to the `Reply` it is given."""
        if self.max_calls is not None and self.usage.calls >= self.max_calls:
            raise LLMCallLimit(self.max_calls)
        reply = Reply()
        error: str | None = None
        tokens = (self.usage.prompt_tokens, self.usage.completion_tokens)
        span = self.trace.llm_call(stage, messages) if self.trace is not None else None
        try:
            yield reply
        except GeneratorExit:  # the reader stopped a stream early: a reply, cut short
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise self.backend.explain(exc) from exc
        except BaseException:
            error = "cancelled"
            raise
        finally:
            self._done(stage, messages, reply.text, error)
            prompt = self.usage.prompt_tokens - tokens[0]
            completion = self.usage.completion_tokens - tokens[1]
            record_llm_call(stage, self.model_name, reply, prompt, completion, error)
            if error is None and measured is not None and self.backend.may_cut_prompts:
                self._check_read(stage, measured, prompt)
            if span is not None and self.trace is not None:
                self.trace.end_llm_call(
                    span,
                    input_tokens=prompt,
                    output_tokens=completion,
                    reply=reply.text,
                    error=error,
                    first_token=reply.first_token,
                )

    def _count(self, message: Any) -> None:
        usage = getattr(message, "usage_metadata", None) or {}
        self.usage.prompt_tokens += int(usage.get("input_tokens", 0))
        self.usage.completion_tokens += int(usage.get("output_tokens", 0))

    def _done(
        self, stage: Stage, messages: list[BaseMessage], reply: str, error: str | None
    ) -> None:
        self.usage.calls += 1
        if self.audit is not None:
            self.audit.prompt(
                user=self.user,
                session_id=self.session_id,
                model=self.model_name,
                agent_type=_AGENT_OF_STAGE.get(stage, "python_coder"),
                stage=stage,
                prompt=[{"role": m.type, "content": str(m.content)} for m in messages],
                answer=reply,
                error=error,
            )


def _answer_cap(extra: dict[str, Any]) -> int | None:
    """The reply's token cap in a call's arguments (OpenAI's or Ollama's name)."""
    options = extra.get("options")
    cap = extra.get("max_tokens")
    if cap is None and isinstance(options, dict):
        cap = options.get("num_predict")
    return cap if isinstance(cap, int) and cap > 0 else None


def _messages(system: str, prompt: str) -> list[BaseMessage]:
    return [SystemMessage(system), HumanMessage(prompt)] if system else [HumanMessage(prompt)]


def parse_json_reply(reply: str, schema: type[T]) -> T:
    """The first JSON object in `reply` that validates as `schema`."""
    for candidate in json_values(reply):
        try:
            return schema.model_validate(candidate)
        except ValidationError:
            continue
    raise StructuredReplyError(f"the reply is not a JSON object matching {schema.__name__}")
