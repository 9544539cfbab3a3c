"""The turn's event contract: one typed stream from the graphs to every wire format.

A turn yields `Routed` first, then what its agent does (`Plan`, `StepStart`,
`ToolCall`, `Code`, `Execution`, `PassageFound`, `Plot`, `Chart`, `Table`), the answer as it is
produced (`AnswerDelta`, or `ToolCalls` of the client's own tools), `Usage`,
`Finish`, and `Final`, which sums the turn up. A run adds `Failed` and `Done`.
The chat model's own events come from `backend/llm/stream.py`.

The graphs emit these through LangGraph's custom stream; the runs buffer keeps
them; a stored turn keeps its steps as their payloads (the UI folds a stored
turn's steps as it folds live ones). `backend/api/encoders/` turns the stream
into each API's format.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from backend.llm.context import ContextFitted
from backend.llm.stream import (
    Accepted,
    AnswerDelta,
    ChatEvent,
    ClientToolCall,
    Event,
    Finish,
    FinishReason,
    TokenLogprob,
    ToolCalls,
    Usage,
)
from backend.tools.sandbox.table_result import Cell, TableColumn, TableSource

__all__ = [
    "Accepted",
    "AnswerDelta",
    "ChatEvent",
    "ClientToolCall",
    "ContextFitted",
    "Event",
    "Finish",
    "FinishReason",
    "TokenLogprob",
    "ToolCalls",
    "Usage",
]


class PlannedStep(BaseModel):
    model_config = ConfigDict(frozen=True)

    goal: str
    tool: str
    success_criterion: str


class Plan(Event):
    type: Literal["plan"] = "plan"
    steps: list[PlannedStep]
    revised: bool
    reason: str | None = None  # why a revised plan changed


class StepStart(Event):
    """Plan-and-Execute starts step `index` (from 1) of its plan."""

    type: Literal["step_start"] = "step_start"
    index: int
    goal: str
    tool: str
    success_criterion: str


class ToolCall(Event):
    """ReAct calls a tool."""

    type: Literal["tool_call"] = "tool_call"
    tool: str
    input: str
    thought: str


class Code(Event):
    """An attempt's code, before the sandbox runs it."""

    type: Literal["code"] = "code"
    tool: str | None = None
    index: int | None = None  # the plan step, in Plan-and-Execute
    attempt: int
    code: str


class Execution(Event):
    """What an attempt (or a tool without attempts) did: its run, output and files."""

    type: Literal["execution"] = "execution"
    SENT_AS_NULL = frozenset({"error"})
    tool: str | None = None
    index: int | None = None
    attempt: int
    run_id: str
    ok: bool
    stdout: str
    error: str | None
    files: list[str]


class PassageFound(Event):
    """A document passage rag_retrieval showed the agent; the answer cites it as [ref]."""

    type: Literal["passage"] = "passage"
    tool: str | None = None
    index: int | None = None
    ref: int
    source: str
    page: int | None = None
    section: str | None = None
    text: str

    @property
    def where(self) -> str:
        """`report.pdf, page 3`, as the agent was shown it."""
        if self.page is not None:
            return f"{self.source}, page {self.page}"
        return f'{self.source}, section "{self.section}"' if self.section else self.source


class Plot(Event):
    """An image a successful run made, by its workspace path (the API adds the `url` that
    serves it: `backend/api/encoders/links.py`)."""

    type: Literal["plot"] = "plot"
    path: str


class Chart(Event):
    """An interactive chart a successful run displayed: its JSON spec (Plotly, or
    Vega-Lite from Altair) for a client to draw live, and its static PNG for any other, by
    their workspace paths (the API adds their URLs)."""

    type: Literal["chart"] = "chart"
    tool: str | None = None
    index: int | None = None
    run_id: str
    library: Literal["plotly", "vega-lite"]
    spec_path: str
    png_path: str


class Table(Event):
    """A table an attempt showed (sent right after its `Execution`): its row count, columns
    and first rows. The API adds the `url` that serves its summary, its pages (sorted,
    filtered) and downloads."""

    type: Literal["table"] = "table"
    tool: str | None = None
    index: int | None = None
    run_id: str
    table_id: str
    name: str
    source: TableSource
    rows: int
    columns: list[TableColumn]
    preview: list[list[Cell]]


class Citation(BaseModel):
    """Where one number of the answer came from; `start`/`end` index the answer (code points).

    `computed`: a run printed it (`run_id`, its `code`, the `output_line` and its 1-based
    `line`). `question`: the user wrote it. `document`: a passage holds it (`source`: "[n] file").
    `tool`: another tool (an MCP server's) returned it (`source`: "tool <name>", the
    `output_line` and `line` of its result).
    """

    model_config = ConfigDict(frozen=True)

    text: str
    start: int
    end: int
    kind: Literal["computed", "question", "document", "tool"]
    run_id: str | None = None
    code: str | None = None
    output_line: str | None = None
    line: int | None = None
    source: str | None = None


class ToolUse(BaseModel):
    model_config = ConfigDict(frozen=True)

    tool: str | None
    input: str | None


class TurnSummary(BaseModel):
    """What a client is told about how a turn was answered (`metadata` on the wire)."""

    model_config = ConfigDict(frozen=True)

    agent_type: str
    route_reason: str
    session_id: str
    conversation_id: str
    tool_calls: list[ToolUse]
    code: list[str]
    files: list[str]
    iterations: int
    llm_calls: int


class Routed(Event):
    """Which agent answers, and why. The model and the turn's summary so far are for
    the encoders (an OpenAI stream names them in its first chunk), not sent as is."""

    type: Literal["router"] = "router"
    agent_type: str
    reason: str
    model: str = Field(exclude=True)
    opening: TurnSummary = Field(exclude=True)


class Final(Event):
    """The turn's end: the whole answer and how it was reached."""

    type: Literal["final"] = "final"
    text: str
    model: str
    summary: TurnSummary
    citations: list[Citation]
    finish_reason: str
    usage: Usage | None = None
    tool_calls: list[ClientToolCall] = Field(default_factory=list)
    logprobs: list[TokenLogprob] = Field(default_factory=list)
    tables: list[Table] = Field(default_factory=list)  # the turn's, for clients that read no steps
    charts: list[Chart] = Field(default_factory=list)  # likewise: each chart's spec and PNG

    def payload(self) -> dict[str, Any]:
        return {
            "type": "final",
            "text": self.text,
            "model": self.model,
            **self.summary.model_dump(mode="json"),
            "citations": self.citations_payload(),
        }

    def citations_payload(self) -> list[dict[str, Any]]:
        return [c.model_dump(mode="json") for c in self.citations]


class Failed(Event):
    type: Literal["error"] = "error"
    SENT_AS_NULL = frozenset({"code"})
    message: str
    code: str | None = None


class Done(Event):
    type: Literal["done"] = "done"
    status: str | None = None


StepEvent = (
    Plan
    | StepStart
    | ToolCall
    | Code
    | Execution
    | PassageFound
    | Plot
    | Chart
    | Table
    | ContextFitted
)
AgentEvent = StepEvent | ChatEvent  # what an agent (or plain chat) yields
TurnEvent = Routed | AgentEvent | Final | Failed | Done
STEP_TYPES = frozenset(
    {
        "plan",
        "step_start",
        "tool_call",
        "code",
        "execution",
        "passage",
        "plot",
        "chart",
        "table",
        "context",
    }
)
SERVER_ONLY_TYPES = frozenset({"accepted", "usage", "finish"})  # what no `/api` client reads
