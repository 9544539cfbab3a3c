"""The agents' tools: a name, a description for the prompt, and `run`.

A tool never raises for a bad input: failures come back as observations the
model can read and react to ("Error: …, please fix your mistakes").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from starlette.concurrency import run_in_threadpool

from backend.core.events import AnswerDelta, Code, Execution, PassageFound, StepEvent, Table
from backend.files.catalog import WorkspaceCatalog
from backend.llm.turn import TurnLLM
from backend.storage.sessions import SessionKey
from backend.tools.python_coder.coder import CoderProgress, PythonCoder
from backend.tools.python_coder.request import AnswerMode, CoderRequest
from backend.tools.python_coder.result import ExecutionAttempt, new_run_id
from backend.tools.rag import RagIndex, rag_retrieval
from backend.tools.sandbox.executor import BasePythonExecutor
from backend.tools.web_search import WebSearch

_OBSERVATION_CHARS = 2_000


Report = Callable[[StepEvent | AnswerDelta], None]


def _unheard(step: StepEvent | AnswerDelta) -> None:
    pass


class ToolData(TypedDict, total=False):
    """What a tool returns besides its text, kept in the agent's state (and checkpoint)."""

    code: str  # python_coder's last code
    output: str  # what the run printed (an MCP tool: its result)
    error: str | None
    files: list[str]  # the files the run wrote (list_files: the data files)
    answer: str | None  # python_coder's worded answer
    attempts: int
    run_id: str | None
    final: bool  # python_coder's `answer` is the turn's, already shown
    mcp: str  # the MCP tool's name
    arguments: dict[str, Any]  # the MCP tool's arguments
    results: list[dict[str, Any]]  # web_search's hits
    citations: list[dict[str, Any]]  # rag_retrieval's sources


@dataclass
class ToolContext:
    """What the agent knows that a tool may use: failed attempts (ReAct), the plan (P&E).

    `report` takes the tool's progress (the graph's stream writer), so a client sees
    each attempt's code before it runs and its output when it is done. `answer` says
    what python_coder's answer is for: its own result ("write"), the turn's answer,
    shown as it is written ("final"; with `partial`, the model may decline when the
    run answered only part of the question), or nothing ("none": the agent answers).
    """

    react: list[str] = field(default_factory=list)
    plan: str = ""
    report: Report = _unheard
    answer: AnswerMode = "write"
    partial: bool = False

    def ran(self, tool: str, result: ToolResult) -> ToolResult:
        """Report `result` as one run of `tool`, for a step without attempts of its own (a
        tool that runs no code, or a step that failed before any ran), then the passages
        it showed; returns it."""
        data = result.data
        code = data.get("code")
        if code:
            self.report(Code(tool=tool, attempt=1, code=code))
        output = data.get("output")
        self.report(
            Execution(
                tool=tool,
                attempt=1,
                run_id=data.get("run_id") or new_run_id(),
                ok=result.ok,
                stdout=output if output is not None else result.observation,
                error=None if result.ok else (data.get("error") or result.observation),
                files=list(data.get("files") or ()),
            )
        )
        for passage in result.passages:
            self.report(passage.model_copy(update={"tool": tool}))
        return result


@dataclass
class ToolResult:
    """`data`: what the agent keeps in its state besides the text (code, answer, files…);
    `passages`: the documents' passages it was shown."""

    observation: str
    ok: bool = True
    data: ToolData = field(default_factory=lambda: ToolData())
    passages: list[PassageFound] = field(default_factory=list)


class AgentTool(Protocol):
    name: str
    description: str

    async def run(self, tool_input: str, context: ToolContext) -> ToolResult: ...


def _cut(text: str) -> str:
    return text if len(text) <= _OBSERVATION_CHARS else text[:_OBSERVATION_CHARS] + "\n…"


@dataclass
class PythonCoderTool:
    coder: PythonCoder
    llm: TurnLLM
    executor: BasePythonExecutor
    session_id: SessionKey
    history: list[tuple[str, str]] = field(default_factory=list)
    question: str = ""  # the user's message this turn answers
    head: str | None = None  # the file metadata the turn's head carries (`TurnHead.files`)
    name: str = "python_coder"
    description: str = (
        "writes and runs Python on the session's data files; input: the task in plain words"
    )

    async def run(self, tool_input: str, context: ToolContext) -> ToolResult:
        request = CoderRequest(
            session_id=self.session_id,
            query=tool_input,
            history=self.history,
            plan=context.plan,
            react=context.react,
            question=self.question,
            answer=context.answer,
            partial=context.partial,
            head=self.head,
        )

        async def running(attempt: int, code: str) -> None:
            context.report(Code(tool=self.name, attempt=attempt, code=code))

        async def ran(attempt: ExecutionAttempt) -> None:
            context.report(
                Execution(
                    tool=self.name,
                    attempt=attempt.attempt,
                    run_id=attempt.run_id,
                    ok=attempt.success,
                    stdout=attempt.stdout,
                    error=None if attempt.success else attempt.error,
                    files=[str(name) for name in attempt.files],
                )
            )
            for table in attempt.tables:  # right after the run that showed them
                context.report(
                    Table(
                        tool=self.name,
                        run_id=attempt.run_id,
                        table_id=table.id,
                        name=table.name,
                        source=table.source,
                        rows=table.rows,
                        columns=table.columns,
                        preview=table.preview,
                    )
                )

        async def answering(text: str) -> None:
            context.report(AnswerDelta(text=text))

        progress = CoderProgress(running=running, ran=ran, answering=answering)
        result = await self.coder.run(request, self.llm, self.executor, progress)
        data: ToolData = {
            "code": result.code,
            "output": result.output,
            "error": result.error,
            "files": result.files,
            "answer": result.answer,
            "attempts": len(result.execution_history),
            "run_id": result.run_id,
            "final": result.final,  # `answer` is the turn's, already shown
        }
        if not result.success:
            outcome = ToolResult(f"Error: {_cut(result.error or 'the code failed')}", False, data)
        else:
            files = f"\nFiles: {', '.join(result.files)}" if result.files else ""
            outcome = ToolResult(f"Output:\n{_cut(result.output.strip())}{files}", True, data)
        if not result.execution_history:  # no attempt ran, so none was reported
            context.ran(self.name, outcome)
        return outcome


@dataclass
class ListFilesTool:
    catalog: WorkspaceCatalog
    session_id: SessionKey
    name: str = "list_files"
    description: str = "lists the session's data files with their columns; input: nothing"

    async def run(self, tool_input: str, context: ToolContext) -> ToolResult:
        files = await self.catalog.data_files(self.session_id)
        if not files:
            return context.ran(
                self.name,
                ToolResult("There are no data files in this session.", True, {"files": []}),
            )
        lines = [f"- {f.name}: {f.summary}" for f in files[:50]]
        names = [f.name for f in files]
        return context.ran(self.name, ToolResult("\n".join(lines), True, {"files": names}))


@dataclass
class DataNoteTool:
    """Proposes a note on an attached data source's table or column (what it means, its
    unit, its allowed values), for the source's owner to accept."""

    propose: Callable[[SessionKey, str], str]  # (session, "<source> <target>: <note>") -> said
    session_id: SessionKey
    name: str = "note_data"
    description: str = (
        "proposes a note on an attached data source's table or column, for its owner to "
        "accept, when you learned what it means; input: <source> <table>[.<column>]: <note>"
    )

    async def run(self, tool_input: str, context: ToolContext) -> ToolResult:
        said = await run_in_threadpool(self.propose, self.session_id, tool_input)
        ok = not said.startswith("Error:")
        return context.ran(self.name, ToolResult(said, ok))


@dataclass
class WebSearchTool:
    search: WebSearch
    name: str = "web_search"
    description: str = "searches the web (Tavily); input: the search query"

    async def run(self, tool_input: str, context: ToolContext) -> ToolResult:
        result = await self.search.search(tool_input)
        hits = [hit.model_dump() for hit in result.results]
        return context.ran(
            self.name, ToolResult(result.as_observation(), result.ok, {"results": hits})
        )


@dataclass
class RagTool:
    index: RagIndex
    user_id: int
    session_id: SessionKey
    name: str = "rag_retrieval"
    description: str = (
        "finds passages in the session's documents (txt, md, pdf, docx, html) with their "
        "source and page; input: what to look for. Cite passages as [1], [2]"
    )

    async def run(self, tool_input: str, context: ToolContext) -> ToolResult:
        try:
            result = await rag_retrieval(
                tool_input, user_id=self.user_id, session_id=self.session_id, index=self.index
            )
        except Exception as exc:  # storage trouble is an observation, not a crash
            return context.ran(self.name, ToolResult(f"Error: rag_retrieval failed: {exc}", False))
        passages = [
            PassageFound(ref=n, source=p.source, page=p.page, section=p.section, text=p.text)
            for n, p in enumerate(result.passages, start=1)
        ]
        return context.ran(
            self.name,
            ToolResult(
                result.as_observation(),
                bool(result.passages),
                {"citations": result.citations},
                passages,
            ),
        )
