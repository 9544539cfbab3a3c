"""One chat turn, from the stored conversation to a turn ready to stream.

`open_turn` does everything that can fail fast (model check, session ownership,
storing the user's message) before any byte is streamed, so those failures
become proper HTTP errors. It makes the turn's `TurnPlan` once, then hands the
turn's events to a `TurnRecorder` (turn_recorder.py), which stores the answer
however the turn ends: completed, failed, or cancelled by a client disconnect.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from backend.core.agents.chat import run_chat
from backend.core.agents.chat_window import ChatPrompt, fit_chat, with_context_notes
from backend.core.agents.client_tools import as_plain_messages
from backend.core.agents.runner import AgentRunner
from backend.core.branches import (
    BranchPoint,
    BranchStates,
    MessageNotFound,
    branch_point,
    fork_from,
)
from backend.core.events import AgentEvent
from backend.core.governor import Governor
from backend.core.group_rights import GroupRights
from backend.core.limits import Limits
from backend.core.responses import new_response_id
from backend.core.router import AgentType, RouteDecision, decide_route, model_classifier
from backend.core.run_slots import RunSlot
from backend.core.turn import Turn, TurnPlan, TurnRequest, TurnState, chat_by_request
from backend.core.turn_recorder import Keeping, TurnRecorder
from backend.llm import LLMBackend
from backend.llm.turn import TurnLLM
from backend.observability.tracing import Span, TurnTrace
from backend.storage import ROOT, Conversation, Message, Store, User
from backend.storage.audit import AuditLog
from backend.storage.sessions import SessionKey, session_key

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Opened:
    """A planned turn and what running it takes."""

    request: TurnRequest
    plan: TurnPlan
    state: TurnState
    trace: TurnTrace
    path: list[Message]  # the stored messages the turn follows (its branch)
    chat_prompt: ChatPrompt | None  # plain chat's prompt, measured against the window
    opening: Callable[[], int | None] | None  # a new session's first write
    chat_span: Span | None  # plain chat's one model call, traced


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
        self.limits = limits  # per-user agent runs and disk (None: unlimited)
        self.store = store
        self.llm = llm
        self.rights = GroupRights(store, llm)  # the models a user's groups give them
        self.audit = audit
        self.agents = agents
        self.keeping = Keeping(store, llm, audit, agents, branches, limits, server)

    async def open_turn(self, user: User, request: TurnRequest) -> Turn:
        """The turn, ready to stream; refused first (`LimitReached`) when the user has used
        up today's tokens or, if it may run an agent, today's sandbox time, or has
        USER_MAX_RUNS going or no disk quota left."""
        # The model first: a refused one takes no place, and a turn holds a run slot only
        # while it is decided whether an agent runs, not while the user's groups are read.
        model = await self.rights.model_for(user, request.model)
        slot, tokens_left = await self._take_run_slot(user, request)
        place = None
        try:
            if self.governor is not None and request.agent_type in ("chat", "auto"):
                # A plain chat reply holds the shared model too (before anything is stored).
                place = await self.governor.take("chat_stream", user.id)
            opened = await self._open(user, request, tokens_left, model)
            agent = opened.plan.agent
            recorder = TurnRecorder(
                self.keeping,
                opened.state,
                opened.trace,
                opening=opened.opening,
                run_slot=slot if agent else None,
                stream_place=None if agent else place,
                chat_span=opened.chat_span,
            )
            if agent:
                recorder.write_opening()  # an agent's session is stored now: its tools look it up
                if self.branches is not None:
                    key = opened.plan.conversation.session_key
                    recorder.closed = await self.branches.begin(key, recorder)
                    if not opened.plan.fresh:
                        await self.branches.enter(key, opened.path)
        except BaseException:
            for each in (slot, place):
                if each is not None:
                    each.release()
            raise
        for each, keep in ((slot, agent), (place, not agent)):
            if each is None:
                continue
            if not keep:
                each.release()  # a chat turn runs no agent; an agent turn has its run slot
                continue
            each.release_with(recorder)  # a turn whose events are never read
        events = recorder.record(self._events(opened))
        return Turn(opened.plan, opened.state, events)

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
        return await self.limits.take_run(user), tokens_left

    def _may_run_agent(self, request: TurnRequest) -> bool:
        return (
            self.agents is not None
            and request.agent_type != "chat"
            and chat_by_request(request) is None
        )

    async def _open(
        self, user: User, request: TurnRequest, tokens_left: int | None, model: str
    ) -> _Opened:
        """The turn's plan on `model`, and what it takes to run it: nothing here changes
        after."""
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
        key = conversation.session_key
        abilities = await self.llm.abilities(model)  # probed at the model's first use
        # Begun in the request's context: the turn's trace is the HTTP request's.
        trace = TurnTrace(request.agent_type, conversation.id, model, self.llm.name)
        llm = TurnLLM.for_backend(
            self.llm,
            model,
            self.audit,
            user=user.username,
            session_id=key,
            profile=abilities.profile,
            trace=trace,
        )
        decision = chat_by_request(request) or await self._route(
            request.agent_type, user_text, key, llm, fresh=fresh
        )
        trace.set_agent(decision.agent_type)
        chat_prompt = None
        if decision.agent_type == "chat":
            chat_prompt = await fit_chat(
                self.llm, model, messages, request.tools, request.options.max_tokens, ours=ours
            )
            messages = chat_prompt.messages
        history = [
            ("user" if m.type == "human" else "assistant", str(m.text))
            for m in messages[:-1]
            if m.type in ("human", "ai")
        ]
        metadata = {"response_id": new_response_id(conversation.id)} if request.response else {}
        plan = TurnPlan(
            user=user,
            conversation=conversation,
            decision=decision,
            model=model,
            question=user_text,
            messages=messages,
            history=history,
            reply_to=stored_user.id if stored_user is not None else point.answers,
            fork_from=fork_from(point.path, decision.agent_type, linear=point.linear),
            fresh=fresh,
            metadata=metadata,
            tokens_left=tokens_left,
            tokens_limit=self.limits.of(user).max_tokens_per_day if self.limits else 0,
        )
        # A new session is stored with its first message. Plain chat's, once the model has
        # the request (its first event), so the write overlaps the wait for the first
        # token: nobody can know the new session before then.
        opening = functools.partial(self._start, conversation, user_text) if fresh else None
        chat_span = trace.llm_call("chat", messages) if chat_prompt is not None else None
        return _Opened(
            request=request,
            plan=plan,
            state=TurnState(plan, llm),
            trace=trace,
            path=point.path,
            chat_prompt=chat_prompt,
            opening=opening,
            chat_span=chat_span,
        )

    def _events(self, opened: _Opened) -> AsyncGenerator[AgentEvent, None]:
        """What answers the plan: plain chat's stream, or an agent's run."""
        plan, llm = opened.plan, opened.state.llm
        if opened.chat_prompt is not None:
            return with_context_notes(opened.chat_prompt, self._chat(llm, plan, opened))
        assert self.agents is not None and plan.decision.agent_type != "chat"
        return self.agents.run(
            plan.decision.agent_type,
            plan.question,
            plan.history,
            plan.user.id,
            plan.conversation.session_key,
            llm,
            fork_from=plan.fork_from,
        )

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

    def _start(self, conversation: Conversation, text: str) -> int | None:
        """Store a new conversation with its first message, which the answer follows; its
        id (None if the conversation is there already)."""
        first = self.store.start_conversation(conversation, text)
        return first.id if first is not None else None

    def _chat(
        self, llm: TurnLLM, plan: TurnPlan, opened: _Opened
    ) -> AsyncGenerator[AgentEvent, None]:
        request = opened.request
        messages = plan.messages
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
        self, requested: AgentType, text: str, key: SessionKey, llm: TurnLLM, *, fresh: bool
    ) -> RouteDecision:
        """`fresh`: the session was made for this turn, so it has no files yet."""
        if self.agents is None:
            return RouteDecision("chat", "no agents are configured")
        # Listing a workspace costs a thread hop: only `auto` reads it, only an old session has one.
        has_files = requested == "auto" and not fresh and await self.agents.has_files(key)
        return await decide_route(
            requested,
            text,
            has_files=has_files,
            classify=model_classifier(llm),
            routes_itself=llm.profile.routes_itself,
        )


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
