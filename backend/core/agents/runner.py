"""Run the ReAct or Plan-and-Execute graph for one turn, as a stream of `AgentEvent`s.

The graphs write their steps to LangGraph's custom stream; this module turns
them into the API's events (`plan`, `step_start`, `tool_call`, `code` and
`execution` per attempt, `plot`) and the final answer into `token` events, so every client
(typed SSE, OpenAI chunks, plain JSON) reads a turn the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from typing import Any, Literal, get_args

import anyio
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from starlette.concurrency import run_in_threadpool

from backend.config import Settings
from backend.core.agents.plan_execute.graph import build_plan_execute_graph
from backend.core.agents.react.graph import build_react_graph
from backend.core.agents.tools import (
    AgentTool,
    ListFilesTool,
    PythonCoderTool,
    RagTool,
    WebSearchTool,
)
from backend.core.events import AgentEvent
from backend.files.catalog import DATA_FOLDER, WorkspaceCatalog
from backend.llm.embedder import embedder_for_backend
from backend.llm.turn import LLMCallLimit, TurnLLM
from backend.storage.checkpoints import Closer, open_checkpointer
from backend.storage.sessions import client_id
from backend.storage.shared import SharedWorkspaces
from backend.tools.python_coder.answer import plots
from backend.tools.python_coder.coder import PythonCoder
from backend.tools.python_coder.result import new_run_id
from backend.tools.rag import RAG_EXTENSIONS, RagIndex
from backend.tools.sandbox.pool import SessionExecutors
from backend.tools.web_search import web_search_from_settings

_WORD = re.compile(r"\s*\S+")
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
    ) -> None:
        self.settings = settings
        self.shared = shared
        self.workspaces = shared.workspaces
        self.catalog = catalog
        self.coder = coder
        self.executors = executors
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

    async def forget(self, user_id: int, session_id: str) -> None:
        """Drop the session's graph checkpoints and RAG passages (a deleted session)."""
        saver = await self.checkpointer()
        for agent in get_args(ToolAgent):
            await saver.adelete_thread(f"{agent}:{session_id}")
        await self.rag.forget_session(user_id, session_id)

    async def uploads(self, session_id: str) -> list[str]:
        listed = await run_in_threadpool(self.workspaces.list_files, session_id)
        return [f.path for f in listed if f.path.startswith(DATA_FOLDER)]

    async def has_files(self, session_id: str) -> bool:
        return bool(await self.uploads(session_id))

    async def tools(
        self,
        user_id: int,
        session_id: str,
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
        if self.web_search is not None:  # offered only when TAVILY_API_KEY is set
            found.append(WebSearchTool(self.web_search))
        return found

    async def run(
        self,
        agent: ToolAgent,
        question: str,
        history: list[tuple[str, str]],
        user_id: int,
        session_id: str,
        llm: TurnLLM,
    ) -> AsyncGenerator[AgentEvent, None]:
        await self.shared.pull(session_id)  # what other servers and the sandbox wrote
        tools = await self.tools(user_id, session_id, llm, history, question)
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
        config: RunnableConfig = {"configurable": {"thread_id": f"{agent}:{session_id}"}}
        final: dict[str, Any] = {}
        step_events = StepEvents(session_id)
        llm.max_calls = self.settings.AGENT_MAX_LLM_CALLS
        timeout = self.settings.AGENT_TURN_TIMEOUT
        stream = graph.astream(inputs, config, stream_mode=_MODES)
        limit: str | None = None
        try:
            async for mode, chunk in _driven(stream, time.monotonic() + timeout):
                if not isinstance(chunk, dict):
                    continue
                if mode == "custom":
                    for event in step_events(chunk):
                        yield event
                else:
                    final = chunk
        except TurnTimeout:
            limit = f"its time limit of {timeout:g} s (AGENT_TURN_TIMEOUT)"
        except LLMCallLimit as exc:
            limit = f"its limit of {exc.limit} LLM calls (AGENT_MAX_LLM_CALLS)"
        answer = str(final.get("final_answer") or "")
        if limit is not None:
            answer = stopped_answer(limit, step_events.last_result, step_events.last_failure)
        for word in _WORD.findall(answer):
            yield AgentEvent("token", {"text": word})
        yield AgentEvent("finish", {"reason": "stop" if limit is None else "length"})


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


class StepEvents:
    """Turns the steps a graph reports into the API's events, for one turn.

    python_coder reports each execution attempt as it starts (`code`, before the
    sandbox runs it) and ends (`execution`); the step's observation then adds a
    `plot` per image. A tool that reports no attempts gets one `execution` from its
    observation.
    """

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.attempts_seen = False
        self.last_result: str | None = None  # the last step that worked: a stopped turn's answer
        self.last_failure: str | None = None

    def __call__(self, step: dict[str, Any]) -> Iterator[AgentEvent]:
        kind = step.get("type")
        where: dict[str, Any] = {
            k: step[k] for k in ("tool", "index") if k in step
        }  # index: the P&E step
        if kind in ("plan", "step_start", "tool_call"):
            yield AgentEvent(kind, {k: v for k, v in step.items() if k != "type"})
        elif kind == "attempt":
            self.attempts_seen = True
            yield AgentEvent("code", {**where, "attempt": step["attempt"], "code": step["code"]})
        elif kind == "attempt_result":
            yield AgentEvent("execution", {**where, **_execution(step)})
        elif kind == "observation":
            if step.get("ok"):
                self.last_result = str(step.get("answer") or step.get("observation") or "")
            else:
                self.last_failure = str(step.get("error") or step.get("observation") or "")
            if not self.attempts_seen:
                if step.get("code"):
                    yield AgentEvent("code", {**where, "attempt": 1, "code": step["code"]})
                fallback = {
                    "attempt": 1,
                    "run_id": step.get("run_id") or new_run_id(),
                    "ok": step.get("ok"),
                    "stdout": step.get("output", step.get("observation", "")),
                    "error": step.get("error") or step.get("observation"),
                    "files": step.get("files", []),
                }
                yield AgentEvent("execution", {**where, **_execution(fallback)})
            self.attempts_seen = False
            for path in plots([str(name) for name in step.get("files", [])]):
                url = f"/api/sessions/{client_id(self.session_id)}/files/{path}"
                yield AgentEvent("plot", {"path": path, "url": url})


def _execution(attempt: dict[str, Any]) -> dict[str, Any]:
    return {
        "attempt": attempt["attempt"],
        "run_id": attempt.get("run_id") or new_run_id(),
        "ok": attempt["ok"],
        "stdout": attempt["stdout"],
        "error": None if attempt["ok"] else attempt["error"],
        "files": [str(name) for name in attempt.get("files", [])],
    }
