"""The agents' tools: a name, a description for the prompt, and `run`.

A tool never raises for a bad input: failures come back as observations the
model can read and react to ("Error: …, please fix your mistakes").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from backend.core.events import (
    AnswerDelta,
    Code,
    Execution,
    Observation,
    PassageFound,
    StepEvent,
    Table,
)
from backend.files.catalog import WorkspaceCatalog
from backend.llm.turn import TurnLLM
from backend.storage.sessions import SessionKey, client_id
from backend.tools.python_coder.coder import CoderProgress, PythonCoder
from backend.tools.python_coder.request import AnswerMode, CoderRequest
from backend.tools.python_coder.result import ExecutionAttempt
from backend.tools.rag import RagIndex, rag_retrieval
from backend.tools.sandbox.executor import BasePythonExecutor
from backend.tools.web_search import WebSearch

_OBSERVATION_CHARS = 2_000


Report = Callable[[StepEvent | AnswerDelta], None]


def _unheard(step: StepEvent | AnswerDelta) -> None:
    pass


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


@dataclass
class ToolResult:
    """`data`: what the agent keeps in its state besides the text (code, answer, files…);
    `passages`: the documents' passages it was shown."""

    observation: str
    ok: bool = True
    data: dict[str, Any] = field(default_factory=dict)
    passages: list[PassageFound] = field(default_factory=list)

    def event(self, tool: str, index: int | None = None) -> Observation:
        """The result as the runner reads it."""
        data = self.data
        return Observation(
            tool=tool,
            index=index,
            ok=self.ok,
            observation=self.observation,
            answer=_text(data.get("answer")),
            error=_text(data.get("error")),
            code=_text(data.get("code")),
            output=_text(data.get("output")),
            run_id=_text(data.get("run_id")),
            files=[name for name in data.get("files") or () if isinstance(name, str)],
            passages=[p.model_copy(update={"tool": tool, "index": index}) for p in self.passages],
        )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


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
            url = f"/api/sessions/{client_id(self.session_id)}/tables"
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
                        url=f"{url}/{table.id}",
                    )
                )

        async def answering(text: str) -> None:
            context.report(AnswerDelta(text=text))

        progress = CoderProgress(running=running, ran=ran, answering=answering)
        result = await self.coder.run(request, self.llm, self.executor, progress)
        data = {
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
            return ToolResult(f"Error: {_cut(result.error or 'the code failed')}", False, data)
        files = f"\nFiles: {', '.join(result.files)}" if result.files else ""
        return ToolResult(f"Output:\n{_cut(result.output.strip())}{files}", True, data)


@dataclass
class ListFilesTool:
    catalog: WorkspaceCatalog
    session_id: SessionKey
    name: str = "list_files"
    description: str = "lists the session's data files with their columns; input: nothing"

    async def run(self, tool_input: str, context: ToolContext) -> ToolResult:
        files = await self.catalog.data_files(self.session_id)
        if not files:
            return ToolResult("There are no data files in this session.", True, {"files": []})
        lines = [f"- {f.name}: {f.summary}" for f in files[:50]]
        return ToolResult("\n".join(lines), True, {"files": [f.name for f in files]})


@dataclass
class WebSearchTool:
    search: WebSearch
    name: str = "web_search"
    description: str = "searches the web (Tavily); input: the search query"

    async def run(self, tool_input: str, context: ToolContext) -> ToolResult:
        result = await self.search.search(tool_input)
        hits = [hit.model_dump() for hit in result.results]
        return ToolResult(result.as_observation(), result.ok, {"results": hits})


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
            return ToolResult(f"Error: rag_retrieval failed: {exc}", False)
        passages = [
            PassageFound(ref=n, source=p.source, page=p.page, section=p.section, text=p.text)
            for n, p in enumerate(result.passages, start=1)
        ]
        return ToolResult(
            result.as_observation(),
            bool(result.passages),
            {"citations": result.citations},
            passages,
        )
