"""Run the ReAct or Plan-and-Execute graph for one turn, as a stream of typed events.

The graphs and their tools write their steps to LangGraph's custom stream as the
events of `backend/core/events.py`; this module passes them on (`StepEvents`, step_events.py,
adds a `Plot` or `Chart` per image a run made), and ends with the answer (`AnswerDelta`, unless the
graph already streamed it as it was written) and `Finish`. For a model with a long
context it first builds the turn's head (`TurnHead`), which every prompt of the turn
then starts with.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import replace
from typing import Any, Literal, get_args

import anyio
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.config import get_stream_writer
from starlette.concurrency import run_in_threadpool

from backend.config import Settings
from backend.core.agents.mcp_tools import McpTool, McpToolSource
from backend.core.agents.plan_execute.graph import build_plan_execute_graph
from backend.core.agents.react.graph import build_react_graph
from backend.core.agents.step_events import StepEvents
from backend.core.agents.tools import (
    AgentTool,
    DataNoteTool,
    ListFilesTool,
    PythonCoderTool,
    RagTool,
    WebSearchTool,
)
from backend.core.data_sources import DataSources
from backend.core.events import (
    AgentEvent,
    AnswerDelta,
    ContextFitted,
    Event,
    Finish,
)
from backend.core.governor import Governor
from backend.core.limits import LimitReached
from backend.files.catalog import DATA_FOLDER, WorkspaceCatalog
from backend.llm.embedder import embedder_for_backend
from backend.llm.turn import LLMCallLimit, TurnLLM
from backend.storage.checkpoints import Closer, open_checkpointer
from backend.storage.sessions import SessionKey
from backend.storage.shared import SharedWorkspaces
from backend.tools.python_coder.coder import PythonCoder
from backend.tools.python_coder.head import TurnHead, turn_head
from backend.tools.rag import RAG_EXTENSIONS, IndexingRefused, RagIndex
from backend.tools.sandbox.pool import SessionExecutors
from backend.tools.web_search import web_search_from_settings

_MODES: list[Any] = ["custom", "values"]
ToolAgent = Literal["react", "plan_execute"]


class AgentRunner:
    def __init__(
        self,
        settings: Settings,
        shared: SharedWorkspaces,
        catalog: WorkspaceCatalog,
        coder: PythonCoder,
        executors: SessionExecutors,
        llm_backend: str,
        mcp: McpToolSource | None = None,
        governor: Governor | None = None,
    ) -> None:
        """`governor`: documents are indexed within a `rag_index` place (None: no bound)."""
        self.settings = settings
        self.mcp = mcp
        self.shared = shared
        self.workspaces = shared.workspaces
        self.catalog = catalog
        self.coder = coder
        self.executors = executors
        # Users' data sources: a session's attached ones are listed in the turn's head, and
        # the agents may propose notes on them (None: no data sources here).
        self.data_sources: DataSources | None = None
        self.web_search = web_search_from_settings(
            settings.TAVILY_API_KEY, settings.TAVILY_BASE_URL
        )
        self._saver: BaseCheckpointSaver[Any] | None = None
        self._close_saver: Closer | None = None
        self._saver_lock = asyncio.Lock()
        self.rag = RagIndex(
            settings.DATA_DIR,
            workspaces=shared.workspaces,
            runner=catalog.runner,
            embedder=embedder_for_backend(llm_backend, settings.OLLAMA_HOST),
            place=None if governor is None else functools.partial(_indexing, governor),
        )

    async def checkpointer(self) -> BaseCheckpointSaver[Any]:
        """The agents' checkpoint store (beside the store's database), opened on first use."""
        async with self._saver_lock:
            if self._saver is None:
                self._saver, self._close_saver = await open_checkpointer(
                    self.settings.DATABASE_URL, self.settings.DATA_DIR
                )
            return self._saver

    async def aclose(self) -> None:
        self.rag.close()
        if self._close_saver is not None:
            await self._close_saver()
            self._saver = self._close_saver = None

    async def forget(self, user_id: int, session_id: SessionKey) -> None:
        """Drop the session's graph checkpoints and RAG passages (a deleted session)."""
        saver = await self.checkpointer()
        for agent in get_args(ToolAgent):
            await saver.adelete_thread(f"{agent}:{session_id}")
        await self.rag.forget_session(user_id, session_id)

    async def checkpoint_after(self, agent: ToolAgent, session_id: SessionKey) -> str | None:
        """The latest checkpoint of the session's thread for `agent`: after a turn, the
        one a branch from that turn continues from."""
        saver = await self.checkpointer()
        found = await saver.aget_tuple({"configurable": {"thread_id": f"{agent}:{session_id}"}})
        if found is None:
            return None
        value = found.config.get("configurable", {}).get("checkpoint_id")
        return value if isinstance(value, str) else None

    async def uploads(self, session_id: SessionKey) -> list[str]:
        listed = await run_in_threadpool(self.workspaces.list_files, session_id)
        return [f.path for f in listed if f.path.startswith(DATA_FOLDER)]

    async def has_files(self, session_id: SessionKey) -> bool:
        """Whether the session has data: uploads, or attached data sources."""
        if await self.uploads(session_id):
            return True
        return bool(await self._sources(session_id))

    async def _sources(self, session_id: SessionKey) -> str:
        if self.data_sources is None:
            return ""
        return await run_in_threadpool(self.data_sources.listing, session_id)

    async def tools(
        self,
        user_id: int,
        session_id: SessionKey,
        llm: TurnLLM,
        history: list[tuple[str, str]],
        question: str = "",
    ) -> list[AgentTool]:
        executor = self.executors.get_python_executor(session_id)
        found: list[AgentTool] = [
            PythonCoderTool(self.coder, llm, executor, session_id, history, question),
            ListFilesTool(self.catalog, session_id),
        ]
        uploads = await self.uploads(session_id)
        if any(path.rsplit(".", 1)[-1].lower() in RAG_EXTENSIONS for path in uploads):
            found.append(RagTool(self.rag, user_id, session_id))  # only with documents
        if self.data_sources is not None and await self._sources(session_id):
            found.append(DataNoteTool(self.data_sources.propose_note, session_id))
        if self.web_search is not None:  # offered only when TAVILY_API_KEY is set
            found.append(WebSearchTool(self.web_search))
        if self.mcp is not None:  # the allowed tools of the MCP servers this user may use
            found.extend(await self.mcp.agent_tools(user_id, llm, llm.profile.mcp_tools))
        return found

    async def run(
        self,
        agent: ToolAgent,
        question: str,
        history: list[tuple[str, str]],
        user_id: int,
        session_id: SessionKey,
        llm: TurnLLM,
        fork_from: str | None = None,
    ) -> AsyncGenerator[AgentEvent, None]:
        """`fork_from`: the checkpoint of the thread to continue from (a branch's last
        turn of this agent, `backend/core/branches.py`); None for the thread's latest."""
        await self.shared.pull(session_id)  # what other servers and the sandbox wrote
        llm = replace(llm, question=question, report=_report_in_graph)
        tools = await self.tools(user_id, session_id, llm, history, question)
        head = None
        if llm.profile.long_context:
            head = await turn_head(
                self.catalog,
                llm,
                session_id,
                [(tool.name, tool.description) for tool in tools],
                history,
                file_limit=self.settings.PYTHON_CODE_MAX_FILES_TO_SELECT,
                sources=await self._sources(session_id),
            )
        # The graph's client, complete: its head, and its limit of calls from here on.
        llm = replace(
            llm,
            head=head.messages if head is not None else llm.head,
            max_calls=self.settings.AGENT_MAX_LLM_CALLS,
        )
        tools = [_bound(tool, llm, head) for tool in tools]
        saver = await self.checkpointer()
        if agent == "react":
            graph = build_react_graph(
                tools, llm, max_iterations=self.settings.AGENT_MAX_ITERATIONS, checkpointer=saver
            )
            inputs: dict[str, Any] = {"steps": None, "pending": None, "stop_reason": ""}
        else:
            graph = build_plan_execute_graph(tools, llm, checkpointer=saver)
            inputs = {"results": None, "plan": [], "replans": 0}
        # One thread per session and agent: the state (and the agent's memory of earlier
        # turns) survives a restart; the turn's own fields start afresh.
        inputs.update(question=question, history=history, final_answer=None)
        configurable: dict[str, Any] = {"thread_id": f"{agent}:{session_id}"}
        if fork_from is not None:
            configurable["checkpoint_id"] = fork_from
        config: RunnableConfig = {"configurable": configurable}
        final: dict[str, Any] = {}
        step_events = StepEvents()
        timeout = self.settings.AGENT_TURN_TIMEOUT
        stream = graph.astream(inputs, config, stream_mode=_MODES)
        limit: str | None = None
        streamed = False  # the answer went out as it was written
        try:
            async for mode, chunk in _driven(stream, time.monotonic() + timeout):
                if mode == "custom" and isinstance(chunk, AnswerDelta):
                    streamed = True
                    yield chunk
                elif mode == "custom" and isinstance(chunk, Event):
                    for event in step_events(chunk):
                        yield event
                elif mode == "values" and isinstance(chunk, dict):
                    final = chunk
                    step_events.settled(chunk)
        except TurnTimeout:
            limit = f"its time limit of {timeout:g} s (AGENT_TURN_TIMEOUT)"
        except LLMCallLimit as exc:
            limit = f"its limit of {exc.limit} LLM calls (AGENT_MAX_LLM_CALLS)"
        answer = "" if streamed else str(final.get("final_answer") or "")
        if limit is not None:
            stopped = stopped_answer(limit, step_events.last_result, step_events.last_failure)
            answer = f"\n\n{stopped}" if streamed else stopped
        if answer:
            yield AnswerDelta(text=answer)
        yield Finish(reason="stop" if limit is None else "length")


def _bound(tool: AgentTool, llm: TurnLLM, head: TurnHead | None) -> AgentTool:
    """`tool` with the graph's client (and python_coder with the files the head describes)."""
    if isinstance(tool, PythonCoderTool):
        return replace(tool, llm=llm, head=head.files if head is not None else tool.head)
    if isinstance(tool, McpTool):
        return replace(tool, llm=llm)
    return tool


@contextlib.asynccontextmanager
async def _indexing(governor: Governor, user_id: int) -> AsyncIterator[None]:
    """A `rag_index` place for bringing a session's documents up to date, within its time
    (parsing in the isolated reader, embedding on the model server)."""
    try:
        async with governor.hold("rag_index", user_id) as held:
            try:
                async with asyncio.timeout(held.seconds):
                    yield
            except TimeoutError:
                raise IndexingRefused(
                    f"indexing took longer than the {held.seconds:g} s the server gives it"
                ) from None
    except LimitReached as refused:
        raise IndexingRefused(refused.message) from None


def _report_in_graph(event: ContextFitted) -> None:
    """A model call's context notice, into the turn's stream when the call is the graph's
    (a call made outside it, such as the head's file choice, is only logged)."""
    try:
        writer = get_stream_writer()
    except RuntimeError:
        return
    writer(event)


class TurnTimeout(Exception):
    """The turn ran past AGENT_TURN_TIMEOUT; its graph has been stopped."""


def stopped_answer(limit: str, last_result: str | None, last_failure: str | None = None) -> str:
    """The polite answer of a turn stopped by a limit: what it has, and why it stopped."""
    head = f"I had to stop: this turn reached {limit}."
    if not last_result:
        failed = (
            f"\n\nThe last step that ran failed:\n\n{last_failure[:1000]}" if last_failure else ""
        )
        return (
            f"{head} No step had finished yet, so I have no result to give. "
            f"Try a simpler question, or raise the limit.{failed if last_failure else ''}"
        )
    return f"{head} Here is what I have so far, from the last step that worked:\n\n{last_result}"


async def _driven(stream: AsyncIterator[Any], deadline: float) -> AsyncGenerator[Any, None]:
    """`stream`'s items, with the graph run in a task of its own, until `deadline`
    (`time.monotonic()`), past which the graph is stopped and `TurnTimeout` raised.

    Servers stop a stream by cancelling an anyio scope, whose cancellation keeps
    re-raising at every await; LangGraph's clean-up cannot cancel the running node
    under it, so a node would run on (holding the session's sandbox) after a
    client disconnect. In its own task the graph gets one plain cancellation and
    is waited for, shielded, until it has unwound. The deadline only ever bounds
    the wait for the graph's next item, never the consumer's own work.
    """
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize=64)

    async def drive() -> None:
        try:
            async for item in stream:
                await queue.put(("item", item))
        except Exception as exc:
            await queue.put(("error", exc))
        else:
            await queue.put(("done", None))

    task = asyncio.create_task(drive())
    try:
        while True:
            try:
                kind, value = await asyncio.wait_for(queue.get(), deadline - time.monotonic())
            except TimeoutError:
                raise TurnTimeout from None
            if kind == "done":
                return
            if kind == "error":
                raise value
            yield value
    finally:
        if not task.done():
            task.cancel()
            with anyio.CancelScope(shield=True), contextlib.suppress(BaseException):
                await task
