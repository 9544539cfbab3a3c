"""One chat turn, from the stored conversation to the recorded answer.

`open_turn` does everything that can fail fast (model check, session ownership,
storing the user's message) before any byte is streamed, so those failures
become proper HTTP errors. The answer is recorded when the turn ends, however it
ends: completed, failed, or cancelled by a client disconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import AsyncGenerator

import anyio
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from starlette.concurrency import run_in_threadpool

from backend.core.agents.chat import run_chat
from backend.core.agents.chat_window import fit_chat, with_context_notes
from backend.core.agents.client_tools import as_plain_messages
from backend.core.agents.runner import AgentRunner, ToolAgent
from backend.core.branches import (
    BranchPoint,
    BranchStates,
    MessageNotFound,
    branch_point,
    fork_from,
)
from backend.core.citations import turn_citations
from backend.core.events import AgentEvent, TurnEvent
from backend.core.governor import Governor
from backend.core.limits import Limits
from backend.core.router import AgentType, RouteDecision, decide_route, model_classifier
from backend.core.run_slots import RunSlot
from backend.core.turn import Turn, TurnRequest, observe_turn
from backend.core.turn_bounds import check_turn_bounds
from backend.llm import LLMBackend
from backend.llm.turn import TurnLLM
from backend.observability.tracing import TurnTrace
from backend.storage import ROOT, Conversation, ConversationNotFound, Message, Store, User
from backend.storage.audit import AuditLog
from backend.storage.sessions import SessionKey, session_key

logger = logging.getLogger(__name__)


class ChatService:
    def __init__(
        self,
        store: Store,
        llm: LLMBackend,
        audit: AuditLog | None = None,
        agents: AgentRunner | None = None,
        server: str = "",
        limits: Limits | None = None,
        branches: BranchStates | None = None,
        governor: Governor | None = None,
    ) -> None:
        self.governor = governor  # plain chat replies' places (None: unbounded)
        self.branches = branches  # each branch's data state (None: no workspaces to keep)
        self.server = server  # this server's id, on turns it holds `running`
        self.limits = limits  # per-user agent runs and disk (None: unlimited)
        self.store = store
        self.llm = llm
        self.audit = audit
        self.agents = agents

    async def open_turn(self, user: User, request: TurnRequest) -> Turn:
        """The turn, ready to stream; refused first (`LimitReached`) when the user has used
        up today's tokens or, if it may run an agent, today's sandbox time, or has
        USER_MAX_RUNS going or no disk quota left."""
        slot, tokens_left = await self._take_run_slot(user, request)
        place = None
        try:
            if self.governor is not None and request.agent_type in ("chat", "auto"):
                # A plain chat reply holds the shared model too (before anything is stored).
                place = await self.governor.take("chat_stream", user.id)
            turn = await self._open(user, request)
        except BaseException:
            for each in (slot, place):
                if each is not None:
                    each.release()
            raise
        agent = turn.decision.agent_type != "chat"
        for each, keep in ((slot, agent), (place, not agent)):
            if each is None:
                continue
            if not keep:
                each.release()  # a chat turn runs no agent; an agent turn has its run slot
                continue
            each.release_with(turn)  # a turn whose events are never read
        turn.run_slot = slot if agent else None
        turn.stream_place = place if not agent else None
        if tokens_left is not None and self.limits is not None:
            turn.tokens_left = tokens_left
            turn.tokens_limit = self.limits.of(user).max_tokens_per_day
        return turn

    async def _take_run_slot(
        self, user: User, request: TurnRequest
    ) -> tuple[RunSlot | None, int | None]:
        """Before anything is stored, so a refused turn leaves no trace; with the tokens
        the user has left today (None: no daily limit)."""
        if self.limits is None:
            return None, None
        agent = self._may_run_agent(request)
        tokens_left = await self.limits.check_daily(user, sandbox=agent)
        if not agent:
            return None, tokens_left
        await self.limits.check_disk_for_run(user)
        return self.limits.take_run(user), tokens_left

    def _may_run_agent(self, request: TurnRequest) -> bool:
        if self.agents is None or request.agent_type == "chat":
            return False
        # `auto` with the client's tools or format is routed to plain chat (see `_open`).
        return not (
            request.agent_type == "auto"
            and (request.tools is not None or request.options.response_format is not None)
        )

    async def _open(self, user: User, request: TurnRequest) -> Turn:
        model = await self.llm.resolve_model(request.model or self.llm.default_model)
        user_text = next(
            (m.text for m in reversed(request.messages) if isinstance(m, HumanMessage)), ""
        )
        fresh = request.session_id is None
        messages = request.messages
        ours = False  # the server added the stored history: it may fit it to the window
        point = BranchPoint(ROOT, [])  # a new conversation's
        stored_user: Message | None = None
        if request.session_id is None:
            if request.parent_message_id not in (None, ROOT):
                raise MessageNotFound(request.parent_message_id)
            conversation = Conversation.new(user.id, _title(user_text))  # stored below
        else:
            key = session_key(user.id, request.session_id)  # namespaced by its owner
            if self.branches is not None:  # the last answer is recorded: its branch follows it
                await self.branches.settled(key)
            conversation, point, stored_user = self._begin(user, key, user_text, request)
            # OpenAI clients resend the whole history; a client that sends only the new
            # message with a known `session_id` gets the stored history (its branch's).
            if not any(isinstance(m, AIMessage) for m in messages):
                ours = bool(point.path)
                messages = _with_history(point.path, messages)
        session_id = conversation.session_key
        abilities = await self.llm.abilities(model)  # probed at the model's first use
        coder_llm = TurnLLM.for_backend(
            self.llm,
            model,
            self.audit,
            user=user.username,
            session_id=session_id,
            profile=abilities.profile,
        )
        # Begun in the request's context: the turn's trace is the HTTP request's.
        trace = TurnTrace(request.agent_type, conversation.id, model, self.llm.name)
        coder_llm.trace = trace
        if request.agent_type == "auto" and request.tools is not None:
            # The client runs its own agent loop: plain chat answers with calls to its tools.
            decision = RouteDecision("chat", "the request carries its own tools")
        elif request.agent_type == "auto" and request.options.response_format is not None:
            # The client wants its own format back: plain chat answers in it.
            decision = RouteDecision("chat", "the request sets response_format")
        else:
            decision = await self._route(
                request.agent_type,
                user_text,
                session_id,
                coder_llm,
                fresh=fresh,
            )
        chat_prompt = None
        if decision.agent_type == "chat" or self.agents is None:
            chat_prompt = await fit_chat(
                self.llm, model, messages, request.tools, request.options.max_tokens, ours=ours
            )
            messages = chat_prompt.messages
        turn = Turn(
            conversation, decision, model, user=user.username, prompt=messages, question=user_text
        )
        turn.agent_llm = coder_llm
        turn.trace = trace
        trace.set_agent(decision.agent_type)
        turn.reply_to = stored_user.id if stored_user is not None else point.answers
        if fresh:
            opening = functools.partial(self._start, turn, user_text)
            if decision.agent_type == "chat":
                # Stored once the model has the request (its first event), so the write
                # overlaps the wait for the first token. Nobody can know the new session
                # before then. An agent's session is stored now: its tools look it up.
                turn.opening = opening
            else:
                opening()
        if decision.agent_type == "chat" or self.agents is None:
            assert chat_prompt is not None  # fitted above, for this same condition
            turn.chat_span = trace.llm_call("chat", messages)
            agent_events = with_context_notes(chat_prompt, self._chat(coder_llm, messages, request))
        else:
            history = [
                ("user" if m.type == "human" else "assistant", str(m.text))
                for m in messages[:-1]
                if m.type in ("human", "ai")
            ]
            if self.branches is not None:
                turn.closed = await self.branches.begin(session_id, turn)
                if not fresh:
                    await self.branches.enter(session_id, point.path)
            agent_events = self.agents.run(
                decision.agent_type,
                user_text,
                history,
                user.id,
                session_id,
                coder_llm,
                fork_from=fork_from(point.path, decision.agent_type, linear=point.linear),
            )
        turn.events = self._recorded(turn, agent_events)
        return turn

    def _begin(
        self, user: User, key: SessionKey, text: str, request: TurnRequest
    ) -> tuple[Conversation, BranchPoint, Message | None]:
        """The session's conversation, where the turn goes in it, and the user's message
        stored there (none when the turn regenerates an answer)."""
        title = _title(text)
        if request.parent_message_id is None:
            conversation, stored, mine = self.store.begin_turn(
                user.id, key, title, text, history=True
            )
            return conversation, branch_point(stored, None, text), mine
        if self.store.session_owner(key) is None:
            raise MessageNotFound(request.parent_message_id)  # no conversation, no message
        conversation = self.store.conversation_for_session(user.id, key, title)
        stored = self.store.list_messages(conversation.id)
        point = branch_point(stored, request.parent_message_id, text)
        new_text = "" if point.regenerate is not None else text
        _, _, mine = self.store.begin_turn(
            user.id, key, title, new_text, history=False, parent_id=point.parent_id
        )
        return conversation, point, mine

    def _start(self, turn: Turn, text: str) -> None:
        """Store a new conversation with its first message, which the answer follows."""
        first = self.store.start_conversation(turn.conversation, text)
        if first is not None:
            turn.reply_to = first.id

    def _chat(
        self, llm: TurnLLM, messages: list[BaseMessage], request: TurnRequest
    ) -> AsyncGenerator[AgentEvent, None]:
        tools = request.tools
        native = forced = None
        if not llm.profile.native_tools:
            # Earlier calls of the client's tools and their results reach the model as text.
            messages = as_plain_messages(messages)
        if tools is not None:
            if llm.profile.native_tools:  # else they are offered in a prompt
                native = self.llm.tool_kwargs(tools.tools, tools.choice)
            if tools.required:
                forced = self.llm.structured_kwargs(tools.call_schema())
        return run_chat(
            self.llm.chat_stream(llm.model_name),
            messages,
            self.llm.call_kwargs(request.options),
            tools,
            native_kwargs=native,
            forced_kwargs=forced,
        )

    async def _route(
        self, requested: AgentType, text: str, session_id: SessionKey, llm: TurnLLM, *, fresh: bool
    ) -> RouteDecision:
        """`fresh`: the session was made for this turn, so it has no files yet."""
        if self.agents is None:
            return RouteDecision("chat", "no agents are configured")
        # Listing a workspace costs a thread hop: only `auto` reads it, only an old session has one.
        has_files = requested == "auto" and not fresh and await self.agents.has_files(session_id)
        return await decide_route(
            requested,
            text,
            has_files=has_files,
            classify=model_classifier(llm),
            routes_itself=llm.profile.routes_itself,
        )

    async def _recorded(
        self, turn: Turn, events: AsyncGenerator[AgentEvent, None]
    ) -> AsyncGenerator[TurnEvent, None]:
        """The turn's events; the turn is recorded when they end, however they end.

        A complete answer is recorded after `final`, when the consumer resumes or
        closes this generator: a stream sends its last bytes first, so storing
        the turn does not delay the client (`Last` in backend/api/sse.py).
        """
        finish, error = "stop", None
        answered = False
        try:
            yield turn.routed()
            async with contextlib.aclosing(events):
                async for event in events:
                    check_turn_bounds(turn, self.limits)  # its time, the day's tokens
                    turn.write_opening()  # the model has the request (see open_turn)
                    self._hold_place(turn)
                    if turn.first_token is None and event.type == "token":
                        turn.first_token = time.perf_counter() - turn.started
                    turn.take(event)
                    yield event
            answered = True
            finish = turn.finish_reason  # "length" when a limit stopped it
            answer = "".join(turn.answer)
            if turn.decision.agent_type != "chat":  # plain chat ran nothing to cite
                # Off the event loop: a megabyte of output takes a few hundred ms to trace.
                turn.citations = await run_in_threadpool(
                    turn_citations, answer, turn.question, turn.steps
                )
            yield turn.final()
        except (asyncio.CancelledError, GeneratorExit):
            if not answered:
                finish = "cancelled"
            raise
        except Exception as exc:
            llm_error = self.llm.explain(exc)
            finish, error = "error", llm_error.message
            raise llm_error from exc
        finally:
            try:
                agent = turn.decision.agent_type
                if self.agents is not None and agent in ("react", "plan_execute"):
                    with anyio.CancelScope(shield=True):
                        await self._close_branch(turn, agent, finish, error)
                else:
                    self._record(turn, finish, error)
            finally:
                self._end_run(turn)
                observe_turn(turn, finish)
                if self.limits is not None:
                    self.limits.usage.add(
                        turn.conversation.user_id, turn.counts()
                    )  # the user's tokens, however it ended

    async def _close_branch(
        self, turn: Turn, agent: ToolAgent, finish: str, error: str | None
    ) -> None:
        """Record an agent turn with the checkpoint its graph reached, then snapshot the
        session's data as that answer's state (`backend/core/branches.py`)."""
        assert self.agents is not None
        key = turn.conversation.session_key
        try:
            turn.extra["checkpoint"] = await self.agents.checkpoint_after(agent, key)
        except Exception as exc:  # the answer matters more than its branch's memory
            logger.warning("session %s: no checkpoint for the turn: %r", key, exc)
        # The answer's place is known (`_hold_place`): its snapshot is taken first, so that
        # a snapshot refused for room is said in the stored answer (`data_state`).
        if self.branches is not None and turn.placeholder is not None:
            note = await self.branches.keep(key, turn.placeholder)
            if note is not None:
                turn.extra["data_state"] = note
        answer = self._record(turn, finish, error)
        if self.branches is not None:
            if answer is not None and turn.placeholder is None:
                await self.branches.keep(key, answer)
            if turn.closed is not None:
                self.branches.end(key, turn.closed)

    def _end_run(self, turn: Turn) -> None:
        """The agent run's slot back to its user, whose runs may have written anything (or
        a plain chat reply's place back to the server)."""
        place, turn.stream_place = turn.stream_place, None
        if place is not None:
            place.release()
        slot, turn.run_slot = turn.run_slot, None
        if slot is not None:
            slot.release()
            if self.limits is not None:
                self.limits.disk.changed(slot.user_id)

    def _hold_place(self, turn: Turn) -> None:
        """An agent turn's answer is stored as `running` once it starts, and completed by
        `_record`: a server killed mid-run leaves it, marked `interrupted` at the next start
        (`Store.interrupt_unfinished`). Plain chat is short and latency-bound: it skips this."""
        if turn.placeholder is not None or turn.decision.agent_type == "chat":
            return
        metadata = {
            **turn.summary().model_dump(mode="json"),
            "model": turn.model,
            "finish_reason": "running",
            "server": self.server,
        }
        with contextlib.suppress(ConversationNotFound):
            stored = self.store.add_message(
                turn.conversation.id, "assistant", "", metadata, parent_id=turn.reply_to
            )
            turn.placeholder = stored.id

    def _record(self, turn: Turn, finish: str, error: str | None) -> int | None:
        """Store the answer; returns its message id (None if the conversation went)."""
        turn.write_opening()  # a turn that failed before its first event
        # The steps let a client redraw the turn's timeline from the stored answer.
        metadata = {
            **turn.summary().model_dump(mode="json"),
            "model": turn.model,
            "finish_reason": finish,
            "steps": [step.payload() for step in turn.steps],
            "citations": [c.model_dump(mode="json") for c in turn.citations],
        }
        if turn.tool_calls:
            metadata["client_tool_calls"] = [c.model_dump(mode="json") for c in turn.tool_calls]
        if error:
            metadata["error"] = error
        metadata.update(turn.extra)
        answer = "".join(turn.answer)
        stored = turn.placeholder
        if stored is not None:
            self.store.update_message(stored, answer, metadata)
        else:
            with contextlib.suppress(ConversationNotFound):  # deleted while we answered
                stored = self.store.add_message(
                    turn.conversation.id, "assistant", answer, metadata, parent_id=turn.reply_to
                ).id
        if self.audit is not None:
            self.audit.prompt(
                user=turn.user,
                session_id=turn.conversation.session_key,
                model=turn.model,
                agent_type=turn.decision.agent_type,
                prompt=[{"role": m.type, "content": str(m.text)} for m in turn.prompt],
                answer=answer,
                finish_reason=finish,
                error=error,
            )

        return stored


def _with_history(stored: list[Message], messages: list[BaseMessage]) -> list[BaseMessage]:
    """The stored conversation (its branch), after the request's system messages, before
    the rest."""
    history: list[BaseMessage] = []
    for message in stored:
        if message.role == "user":
            history.append(HumanMessage(message.content))
        elif message.role == "assistant" and message.content:
            history.append(AIMessage(message.content))
    system = [m for m in messages if m.type == "system"]
    rest = [m for m in messages if m.type != "system"]
    return system + history + rest


def _title(text: str) -> str:
    """A conversation's title: its first message on one line."""
    return " ".join(text.split()) or "New chat"
