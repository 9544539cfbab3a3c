"""One chat turn's request, and the turn as it runs: its events and what they told.

`ChatService.open_turn` (chat_service.py) makes a `Turn`; every event of its stream
passes through `Turn.take` on the way to the client, so however the turn ends, the
service records what the `Turn` holds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import BaseMessage

from backend.core.agents.client_tools import ClientTools
from backend.core.events import (
    AgentEvent,
    AnswerDelta,
    Chart,
    Citation,
    ClientToolCall,
    Final,
    Finish,
    Routed,
    StepEvent,
    Table,
    TokenLogprob,
    ToolCalls,
    ToolUse,
    TurnEvent,
    TurnSummary,
    Usage,
)
from backend.core.governor import Place
from backend.core.router import AgentType, RouteDecision
from backend.core.run_slots import RunSlot
from backend.core.usage import llm_counts
from backend.llm import GenerationOptions
from backend.llm.context import estimate_messages
from backend.llm.turn import Reply, TurnLLM, record_llm_call
from backend.observability.metrics import TURN_SECONDS, TURNS
from backend.observability.tracing import Span, TurnTrace
from backend.storage import Conversation, UsageCounts


@dataclass(frozen=True)
class TurnRequest:
    messages: list[BaseMessage]
    model: str = ""
    session_id: str | None = None
    agent_type: AgentType = "auto"
    options: GenerationOptions = field(default_factory=GenerationOptions)
    tools: ClientTools | None = None  # the client's own tools (its agent loop runs them)
    # The message this one follows (backend/core/branches.py): None, the latest; ROOT (0),
    # none (a new first message); the user's own message: its answer is made again.
    parent_message_id: int | None = None


@dataclass
class Turn:
    """One turn as it runs: its events, and what they have told so far."""

    conversation: Conversation
    decision: RouteDecision
    model: str
    events: AsyncGenerator[TurnEvent, None] = field(init=False)
    answer: list[str] = field(default_factory=list)
    usage: Usage | None = None
    finish_reason: str = "stop"
    user: str = ""
    prompt: list[BaseMessage] = field(default_factory=list)
    steps: list[StepEvent] = field(default_factory=list)  # the agent's steps
    tool_calls: list[ClientToolCall] = field(default_factory=list)  # calls of the client's tools
    logprobs: list[TokenLogprob] = field(default_factory=list)  # the tokens', when asked for
    agent_llm: TurnLLM | None = None  # counts the router's and the agents' model calls
    opening: Callable[[], None] | None = None  # a new session's first write, not done yet
    placeholder: int | None = None  # an agent turn's answer, stored `running` as it starts
    question: str = ""  # the user's message this turn answers
    citations: list[Citation] = field(default_factory=list)  # the answer's numbers' sources
    run_slot: RunSlot | None = None  # the user's place among their concurrent agent runs
    stream_place: Place | None = None  # a plain chat reply's place (the governor's chat_stream)
    tokens_left: int | None = None  # the user's model tokens left today, as the turn began
    tokens_limit: int = 0  # their daily limit (USER_MAX_TOKENS_PER_DAY or an admin's)
    reply_to: int | None = None  # the stored user message the answer follows (None: latest)
    extra: dict[str, Any] = field(default_factory=dict)  # kept in the answer's metadata
    closed: asyncio.Event | None = None  # set once an agent turn is recorded (branches.py)
    trace: TurnTrace | None = None  # its spans (backend/observability/tracing.py)
    chat_span: Span | None = None  # plain chat's one LLM call, traced
    started: float = field(default_factory=time.perf_counter)
    first_token: float | None = None  # seconds from the start to the answer's first piece

    def write_opening(self) -> None:
        """Store what `open_turn` left to write (a new session and its first message), once."""
        opening, self.opening = self.opening, None
        if opening is not None:
            opening()

    def summary(self) -> TurnSummary:
        steps = self.steps
        executions = [s for s in steps if s.type == "execution"]
        return TurnSummary(
            agent_type=self.decision.agent_type,
            route_reason=self.decision.reason,
            session_id=self.conversation.session_id,
            conversation_id=self.conversation.id,
            tool_calls=[_tool_use(s) for s in steps if s.type in ("tool_call", "step_start")],
            code=[s.code for s in steps if s.type == "code"],
            files=sorted({f for s in executions for f in s.files}),
            iterations=len(executions),
            # The router's, the graph's and python_coder's calls; plain chat adds its own one.
            llm_calls=(self.agent_llm.usage.calls if self.agent_llm else 0)
            + (1 if self.decision.agent_type == "chat" else 0),
        )

    def routed(self) -> Routed:
        return Routed(
            agent_type=self.decision.agent_type,
            reason=self.decision.reason,
            model=self.model,
            opening=self.summary(),
        )

    def final(self) -> Final:
        return Final(
            text="".join(self.answer),
            model=self.model,
            summary=self.summary(),
            citations=self.citations,
            finish_reason=self.finish_reason,
            usage=self.usage,
            tool_calls=self.tool_calls,
            logprobs=self.logprobs,
            tables=[step for step in self.steps if isinstance(step, Table)],
            charts=[step for step in self.steps if isinstance(step, Chart)],
        )

    def take(self, event: AgentEvent) -> None:
        """What `event` tells about the turn."""
        if isinstance(event, AnswerDelta):
            self.answer.append(event.text)
            self.logprobs.extend(event.logprobs or ())
        elif isinstance(event, Usage):
            self.usage = event
        elif isinstance(event, Finish):
            self.finish_reason = event.reason
        elif isinstance(event, ToolCalls):
            self.tool_calls = event.calls
        elif event.type != "accepted":
            self.steps.append(event)

    def counts(self) -> UsageCounts:
        """The turn's model calls and tokens so far: the router's, the agents' and
        python_coder's (`agent_llm`), and plain chat's one call, as its stream reported it."""
        counts = UsageCounts(turns=1)
        if self.agent_llm is not None:
            counts += llm_counts(self.agent_llm.usage)
        if self.decision.agent_type == "chat":
            chat = self.usage
            if chat is not None:
                prompt, completion = chat.prompt_tokens, chat.completion_tokens
            else:  # cut off (stopped, disconnected, over a limit) before the model said
                prompt = estimate_messages(self.prompt)
                completion = len(self.answer)  # a token a streamed piece
            counts += UsageCounts(llm_calls=1, prompt_tokens=prompt, completion_tokens=completion)
        return counts

    async def collect(self) -> Final:
        """Run the turn to the end; its `Final` event."""
        final: Final | None = None
        async for event in self.events:
            if isinstance(event, Final):
                final = event
        if final is None:  # a turn that ends without raising ends with Final
            raise RuntimeError("the turn ended without its Final event")
        return final


def _tool_use(step: StepEvent) -> ToolUse:
    if step.type == "tool_call":
        return ToolUse(tool=step.tool, input=step.input)
    if step.type == "step_start":
        return ToolUse(tool=step.tool, input=step.goal)
    raise ValueError(step.type)


def observe_turn(turn: Turn, finish: str) -> None:
    """The ended turn in the metrics and its trace: its outcome, time and tokens (plain
    chat's one model call is measured here, as its stream carried it)."""
    agent = turn.decision.agent_type
    outcome = {"error": "failed", "cancelled": "cancelled"}.get(finish, "answered")
    TURNS.labels(agent, outcome).inc()
    TURN_SECONDS.labels(agent).observe(time.perf_counter() - turn.started)
    usage = turn.agent_llm.usage if turn.agent_llm is not None else None
    prompt = usage.prompt_tokens if usage is not None else 0
    completion = usage.completion_tokens if usage is not None else 0
    if agent == "chat":
        chat_prompt = turn.usage.prompt_tokens if turn.usage is not None else 0
        chat_completion = turn.usage.completion_tokens if turn.usage is not None else 0
        prompt, completion = prompt + chat_prompt, completion + chat_completion
        error = None if outcome == "answered" else finish
        reply = Reply()
        reply.started, reply.first_token = turn.started, turn.first_token
        reply.parts = turn.answer
        record_llm_call("chat", turn.model, reply, chat_prompt, chat_completion, error)
        span, turn.chat_span = turn.chat_span, None
        if span is not None and turn.trace is not None:
            turn.trace.end_llm_call(
                span,
                input_tokens=chat_prompt,
                output_tokens=chat_completion,
                reply="".join(turn.answer),
                error=error,
                first_token=turn.first_token,
            )
    if turn.trace is not None:
        turn.trace.end(outcome, prompt, completion)
