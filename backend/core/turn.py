"""One chat turn: its request, its plan, and what its events told.

`ChatService.open_turn` (chat_service.py) reads a `TurnRequest` and makes the turn's
`TurnPlan` once: the conversation, the answer's place in it, the route, the model and
the prompt. Nothing changes a plan after. The turn's events pass through a
`TurnRecorder` (turn_recorder.py) on their way to the client; it keeps what they tell in
the turn's `TurnState` and stores the answer however the turn ends. A route gets a
`Turn`: the plan, the state and the event stream.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Mapping
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
from backend.core.router import AgentType, RouteDecision
from backend.core.usage import llm_counts
from backend.llm import GenerationOptions
from backend.llm.context import estimate_messages
from backend.llm.turn import TurnLLM
from backend.storage import Conversation, UsageCounts, User


@dataclass(frozen=True)
class TurnRequest:
    messages: list[BaseMessage]
    model: str = ""
    session_id: str | None = None  # the client's id for its session (never a key)
    agent_type: AgentType = "auto"
    options: GenerationOptions = field(default_factory=GenerationOptions)
    tools: ClientTools | None = None  # the client's own tools (its agent loop runs them)
    # The message this one follows (backend/core/branches.py): None, the latest; ROOT (0),
    # none (a new first message); the user's own message: its answer is made again.
    parent_message_id: int | None = None
    response: bool = False  # a Responses API turn: its answer gets a response id


def chat_by_request(request: TurnRequest) -> RouteDecision | None:
    """Plain chat when an `auto` request says so by what it carries, else None (the router
    decides): the client runs its own agent loop, or wants its own format back."""
    if request.agent_type != "auto":
        return None
    if request.tools is not None:
        return RouteDecision("chat", "the request carries its own tools")
    if request.options.response_format is not None:
        return RouteDecision("chat", "the request sets response_format")
    return None


@dataclass(frozen=True)
class TurnPlan:
    """What the service decided before the turn runs."""

    user: User
    conversation: Conversation
    decision: RouteDecision
    model: str
    question: str  # the user's message this turn answers
    messages: list[BaseMessage]  # the prompt: plain chat's, fitted to the window
    history: list[tuple[str, str]]  # earlier (role, text) messages, for an agent
    reply_to: int | None  # the stored message the answer follows (None: a new conversation)
    fork_from: str | None  # the agent's checkpoint the branch continues (branches.py)
    fresh: bool  # the session is new with this turn
    metadata: Mapping[str, Any] = field(default_factory=dict)  # kept with the answer
    tokens_left: int | None = None  # the user's model tokens left today, as the turn began
    tokens_limit: int = 0  # their daily limit (USER_MAX_TOKENS_PER_DAY or an admin's)

    @property
    def agent(self) -> bool:
        return self.decision.agent_type != "chat"

    @property
    def response_id(self) -> str | None:
        """The Responses API's id of the answer (`TurnRequest.response`)."""
        value = self.metadata.get("response_id")
        return value if isinstance(value, str) else None


@dataclass
class TurnState:
    """What the turn's events have told so far."""

    plan: TurnPlan
    llm: TurnLLM  # counts the router's, the agents' and python_coder's model calls
    answer: list[str] = field(default_factory=list)
    usage: Usage | None = None  # plain chat's one call, as its stream reported it
    finish_reason: str = "stop"
    steps: list[StepEvent] = field(default_factory=list)  # the agent's steps
    tool_calls: list[ClientToolCall] = field(default_factory=list)  # calls of the client's tools
    logprobs: list[TokenLogprob] = field(default_factory=list)  # the tokens', when asked for
    citations: list[Citation] = field(default_factory=list)  # the answer's numbers' sources
    started: float = field(default_factory=time.perf_counter)
    first_token: float | None = None  # seconds from the start to the answer's first piece

    def take(self, event: AgentEvent) -> None:
        """What `event` tells about the turn."""
        if self.first_token is None and event.type == "token":
            self.first_token = time.perf_counter() - self.started
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

    @property
    def text(self) -> str:
        return "".join(self.answer)

    def summary(self) -> TurnSummary:
        plan, steps = self.plan, self.steps
        executions = [s for s in steps if s.type == "execution"]
        return TurnSummary(
            agent_type=plan.decision.agent_type,
            route_reason=plan.decision.reason,
            session_id=plan.conversation.session_id,
            conversation_id=plan.conversation.id,
            tool_calls=[_tool_use(s) for s in steps if s.type in ("tool_call", "step_start")],
            code=[s.code for s in steps if s.type == "code"],
            files=sorted({f for s in executions for f in s.files}),
            iterations=len(executions),
            # The router's, the graph's and python_coder's calls; plain chat adds its own one.
            llm_calls=self.llm.usage.calls + (0 if plan.agent else 1),
        )

    def routed(self) -> Routed:
        decision = self.plan.decision
        return Routed(
            agent_type=decision.agent_type,
            reason=decision.reason,
            model=self.plan.model,
            opening=self.summary(),
        )

    def final(self) -> Final:
        return Final(
            text=self.text,
            model=self.plan.model,
            summary=self.summary(),
            citations=self.citations,
            finish_reason=self.finish_reason,
            usage=self.usage,
            tool_calls=self.tool_calls,
            logprobs=self.logprobs,
            tables=[step for step in self.steps if isinstance(step, Table)],
            charts=[step for step in self.steps if isinstance(step, Chart)],
        )

    def counts(self) -> UsageCounts:
        """The turn's model calls and tokens so far: the router's, the agents' and
        python_coder's (`llm`), and plain chat's one call, as its stream reported it."""
        counts = UsageCounts(turns=1) + llm_counts(self.llm.usage)
        if not self.plan.agent:
            chat = self.usage
            if chat is not None:
                prompt, completion = chat.prompt_tokens, chat.completion_tokens
            else:  # cut off (stopped, disconnected, over a limit) before the model said
                prompt = estimate_messages(self.plan.messages)
                completion = len(self.answer)  # a token a streamed piece
            counts += UsageCounts(llm_calls=1, prompt_tokens=prompt, completion_tokens=completion)
        return counts


@dataclass(frozen=True)
class Turn:
    """A turn ready to stream: read `events` (or `collect` them) to run it."""

    plan: TurnPlan
    state: TurnState
    events: AsyncGenerator[TurnEvent, None]

    @property
    def conversation(self) -> Conversation:
        return self.plan.conversation

    @property
    def steps(self) -> list[StepEvent]:
        return self.state.steps

    def counts(self) -> UsageCounts:
        return self.state.counts()

    async def collect(self) -> Final:
        """Run the turn to the end; its `Final` event."""
        return await collect(self.events)


async def collect(events: AsyncGenerator[TurnEvent, None]) -> Final:
    """Read a turn's `events` to the end; its `Final` event."""
    final: Final | None = None
    async for event in events:
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
