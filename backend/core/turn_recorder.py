"""A turn's events on their way to the client, and the turn stored however it ends.

`TurnRecorder.record` passes each event through, keeping what it tells in the turn's
`TurnState`. A complete answer is stored after `Final`, when the consumer resumes or
closes the stream: a stream sends its last bytes first, so storing the turn does not
delay the client (`Last` in backend/api/sse.py). A failed or cancelled turn is stored as
far as it went. The recorder also gives back what the turn held: its user's run slot,
or a plain chat reply's place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.concurrency import run_in_threadpool

from backend.core.agents.runner import AgentRunner, ToolAgent
from backend.core.branches import BranchStates
from backend.core.citations import turn_citations
from backend.core.events import AgentEvent, TurnEvent
from backend.core.governor import Place
from backend.core.limits import Limits
from backend.core.run_slots import RunSlot
from backend.core.turn import TurnPlan, TurnState
from backend.core.turn_bounds import check_turn_bounds
from backend.llm import LLMBackend
from backend.llm.turn import Reply, record_llm_call
from backend.observability.metrics import TURN_SECONDS, TURNS
from backend.observability.tracing import Span, TurnTrace
from backend.storage import ConversationNotFound, Store
from backend.storage.audit import AuditLog

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Keeping:
    """Where a turn is stored and what it answers to: built once by the chat service."""

    store: Store
    llm: LLMBackend
    audit: AuditLog | None
    agents: AgentRunner | None
    branches: BranchStates | None
    limits: Limits | None
    server: str  # this server's id, on the answers it holds `running`


class TurnRecorder:
    def __init__(
        self,
        keeping: Keeping,
        state: TurnState,
        trace: TurnTrace,
        *,
        opening: Callable[[], int | None] | None = None,
        run_slot: RunSlot | None = None,
        stream_place: Place | None = None,
        chat_span: Span | None = None,
    ) -> None:
        self.keeping = keeping
        self.state = state
        self.plan: TurnPlan = state.plan
        self.trace = trace
        self.reply_to = self.plan.reply_to
        self._opening = opening  # a new session's first write, not done yet
        self.run_slot = run_slot  # the user's place among their concurrent agent runs
        self.stream_place = stream_place  # a plain chat reply's place (chat_stream)
        self._chat_span = chat_span  # plain chat's one LLM call, traced
        self.placeholder: int | None = None  # an agent's answer, stored `running` as it starts
        self.extra: dict[str, Any] = {}  # the branch's checkpoint and data state
        self.closed: asyncio.Event | None = None  # set once an agent turn is recorded

    def write_opening(self) -> None:
        """Store what the plan left to write (a new session and its first message), once."""
        opening, self._opening = self._opening, None
        if opening is not None:
            first = opening()
            if first is not None:
                self.reply_to = first

    async def record(self, events: AsyncGenerator[AgentEvent, None]) -> AsyncGenerator[TurnEvent]:
        """The turn's events; the turn is stored when they end, however they end."""
        state, keeping = self.state, self.keeping
        finish, error = "stop", None
        answered = False
        try:
            yield state.routed()
            async with contextlib.aclosing(events):
                async for event in events:
                    check_turn_bounds(state, self.stream_place, keeping.limits)
                    self.write_opening()  # the model has the request (see ChatService)
                    self._hold_place()
                    state.take(event)
                    yield event
            answered = True
            finish = state.finish_reason  # "length" when a limit stopped it
            if self.plan.agent:  # plain chat ran nothing to cite
                # Off the event loop: a megabyte of output takes a few hundred ms to trace.
                state.citations = await run_in_threadpool(
                    turn_citations, state.text, self.plan.question, state.steps
                )
            yield state.final()
        except (asyncio.CancelledError, GeneratorExit):
            if not answered:
                finish = "cancelled"
            raise
        except Exception as exc:
            llm_error = keeping.llm.explain(exc)
            finish, error = "error", llm_error.message
            raise llm_error from exc
        finally:
            try:
                agent = self.plan.decision.agent_type
                if keeping.agents is not None and agent in ("react", "plan_execute"):
                    with anyio.CancelScope(shield=True):
                        await self._close_branch(agent, finish, error)
                else:
                    self._store(finish, error)
            finally:
                self._end_run()
                self._observe(finish)
                if keeping.limits is not None:  # the user's tokens, however it ended
                    keeping.limits.usage.add(self.plan.user.id, state.counts())

    async def _close_branch(self, agent: ToolAgent, finish: str, error: str | None) -> None:
        """Store an agent turn with the checkpoint its graph reached, then snapshot the
        session's data as that answer's state (`backend/core/branches.py`)."""
        agents, branches = self.keeping.agents, self.keeping.branches
        assert agents is not None
        key = self.plan.conversation.session_key
        try:
            self.extra["checkpoint"] = await agents.checkpoint_after(agent, key)
        except Exception as exc:  # the answer matters more than its branch's memory
            logger.warning("session %s: no checkpoint for the turn: %r", key, exc)
        # The answer's place is known (`_hold_place`): its snapshot is taken first, so that
        # a snapshot refused for room is said in the stored answer (`data_state`).
        if branches is not None and self.placeholder is not None:
            note = await branches.keep(key, self.placeholder)
            if note is not None:
                self.extra["data_state"] = note
        answer = self._store(finish, error)
        if branches is not None:
            if answer is not None and self.placeholder is None:
                await branches.keep(key, answer)
            if self.closed is not None:
                branches.end(key, self.closed)

    def _end_run(self) -> None:
        """The agent run's slot back to its user, whose runs may have written anything (or
        a plain chat reply's place back to the server)."""
        place, self.stream_place = self.stream_place, None
        if place is not None:
            place.release()
        slot, self.run_slot = self.run_slot, None
        if slot is not None:
            slot.release()
            if self.keeping.limits is not None:
                self.keeping.limits.disk.changed(slot.user_id)

    def _hold_place(self) -> None:
        """An agent turn's answer is stored as `running` once it starts, and completed by
        `_store`: a server killed mid-run leaves it, marked `interrupted` at the next start
        (`Store.interrupt_unfinished`). Plain chat is short and latency-bound: it skips this."""
        if self.placeholder is not None or not self.plan.agent:
            return
        metadata = {
            **self.state.summary().model_dump(mode="json"),
            "model": self.plan.model,
            "finish_reason": "running",
            "server": self.keeping.server,
        }
        with contextlib.suppress(ConversationNotFound):
            stored = self.keeping.store.add_message(
                self.plan.conversation.id, "assistant", "", metadata, parent_id=self.reply_to
            )
            self.placeholder = stored.id

    def _store(self, finish: str, error: str | None) -> int | None:
        """Store the answer; returns its message id (None if the conversation went)."""
        self.write_opening()  # a turn that failed before its first event
        state, plan, store = self.state, self.plan, self.keeping.store
        # The steps let a client redraw the turn's timeline from the stored answer.
        metadata = {
            **state.summary().model_dump(mode="json"),
            "model": plan.model,
            "finish_reason": finish,
            "steps": [step.payload() for step in state.steps],
            "citations": [c.model_dump(mode="json") for c in state.citations],
        }
        if state.tool_calls:
            metadata["client_tool_calls"] = [c.model_dump(mode="json") for c in state.tool_calls]
        if error:
            metadata["error"] = error
        metadata.update(plan.metadata)
        metadata.update(self.extra)
        answer = state.text
        stored = self.placeholder
        if stored is not None:
            store.update_message(stored, answer, metadata)
        else:
            with contextlib.suppress(ConversationNotFound):  # deleted while we answered
                stored = store.add_message(
                    plan.conversation.id, "assistant", answer, metadata, parent_id=self.reply_to
                ).id
        audit = self.keeping.audit
        if audit is not None:
            audit.prompt(
                user=plan.user.username,
                session_id=plan.conversation.session_key,
                model=plan.model,
                agent_type=plan.decision.agent_type,
                prompt=[{"role": m.type, "content": str(m.text)} for m in plan.messages],
                answer=answer,
                finish_reason=finish,
                error=error,
            )
        return stored

    def _observe(self, finish: str) -> None:
        """The ended turn in the metrics and its trace: its outcome, time and tokens (plain
        chat's one model call is measured here, as its stream carried it)."""
        state = self.state
        agent = self.plan.decision.agent_type
        outcome = {"error": "failed", "cancelled": "cancelled"}.get(finish, "answered")
        TURNS.labels(agent, outcome).inc()
        TURN_SECONDS.labels(agent).observe(time.perf_counter() - state.started)
        usage = state.llm.usage
        prompt, completion = usage.prompt_tokens, usage.completion_tokens
        if agent == "chat":
            chat_prompt = state.usage.prompt_tokens if state.usage is not None else 0
            chat_completion = state.usage.completion_tokens if state.usage is not None else 0
            prompt, completion = prompt + chat_prompt, completion + chat_completion
            error = None if outcome == "answered" else finish
            reply = Reply()
            reply.started, reply.first_token = state.started, state.first_token
            reply.parts = state.answer
            record_llm_call("chat", self.plan.model, reply, chat_prompt, chat_completion, error)
            span, self._chat_span = self._chat_span, None
            if span is not None:
                self.trace.end_llm_call(
                    span,
                    input_tokens=chat_prompt,
                    output_tokens=chat_completion,
                    reply=state.text,
                    error=error,
                    first_token=state.first_token,
                )
        self.trace.end(outcome, prompt, completion)
