"""The turn's event contract: what each event sends, and what a tool's result becomes."""

from __future__ import annotations

from backend.core.agents.step_events import StepEvents
from backend.core.agents.tools import ToolContext, ToolData, ToolResult
from backend.core.events import Code, Event, Execution, PassageFound, Plot


def test_a_payload_leaves_out_what_the_event_does_not_know_but_sends_a_null_error() -> None:
    ran = Execution(
        tool="python_coder", attempt=1, run_id="r1", ok=True, stdout="1\n", error=None, files=[]
    )
    assert ran.payload() == {
        "type": "execution", "tool": "python_coder", "attempt": 1, "run_id": "r1",
        "ok": True, "stdout": "1\n", "error": None, "files": [],
    }  # fmt: skip  # a ReAct step has no plan index
    assert Code(tool="python_coder", index=2, attempt=1, code="x").model_copy(
        update={"index": 3}
    ).payload() == {"type": "code", "tool": "python_coder", "index": 3, "attempt": 1, "code": "x"}


def test_a_tool_without_attempts_becomes_an_execution_and_its_passages_follow_as_data() -> None:
    passage = PassageFound(ref=1, source="report.pdf", page=3, text="Revenue grew 12.5%.")
    result = ToolResult("[1] (source: report.pdf, page 3) Revenue grew 12.5%.", True, {}, [passage])
    reported: list[Event] = []  # a Plan-and-Execute step's writer: its index on each event
    context = ToolContext(report=lambda e: reported.append(e.model_copy(update={"index": 2})))
    assert context.ran("rag_retrieval", result) is result
    steps = StepEvents()
    events = [shown for event in reported for shown in steps(event)]

    assert [e.type for e in events] == ["execution", "passage"]
    execution, found = events
    assert isinstance(execution, Execution) and execution.index == 2 and execution.ok
    assert execution.stdout == result.observation and execution.error is None
    assert isinstance(found, PassageFound) and (found.tool, found.index) == ("rag_retrieval", 2)
    assert found.where == "report.pdf, page 3" and found.text == "Revenue grew 12.5%."


def test_python_coders_reported_attempts_are_not_repeated_and_its_plots_follow() -> None:
    steps = StepEvents()
    code = Code(tool="python_coder", attempt=1, code="plot()")
    assert list(steps(code)) == [code]
    files = ["outputs/plot_1.png", "outputs/table.csv"]
    ran = Execution(
        tool="python_coder", attempt=1, run_id="r1", ok=True, stdout="done", error=None, files=files
    )
    events = list(steps(ran))
    assert events == [ran, Plot(path="outputs/plot_1.png")]  # its URL is the API's
    # The step the tool finished, in the graph's state: its text is the latest result.
    data: ToolData = {"code": "plot()", "files": files}
    step = {"observation": "Output: done", "ok": True, "data": data}
    steps.settled({"steps": [step]})
    assert steps.last_result == "Output: done"
    assert list(steps(ran)) == [ran]  # a plot is shown once
