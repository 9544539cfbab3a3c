"""A turn's citations from its streamed steps: python_coder's runs and rag_retrieval's passages."""

from __future__ import annotations

from backend.core.citations import turn_citations
from backend.core.events import Code, Execution, PassageFound, StepEvent


def test_runs_and_passages_come_from_the_steps_and_failed_runs_do_not_count() -> None:
    steps: list[StepEvent] = [
        Code(tool="python_coder", attempt=1, code="print(x)"),
        Execution(tool="python_coder", attempt=1, run_id="run_bad", ok=False,
                  stdout="total: 480", error="boom", files=[]),
        Code(tool="python_coder", attempt=2, code="print(total)"),
        Execution(tool="python_coder", attempt=2, run_id="run_ok", ok=True,
                  stdout="total: 410\n", error=None, files=["outputs/plot_1.png"]),
        Execution(tool="rag_retrieval", attempt=1, run_id="run_rag", ok=True,
                  stdout="Passages from the uploaded documents …", error=None, files=[]),
        PassageFound(tool="rag_retrieval", ref=1, source="report.pdf", page=3,
                     text="Revenue grew 12.5% in 2023."),
    ]  # fmt: skip
    answer = "The total is 410, not 480; revenue grew 12.5% [1] (see plot_1.png)."
    citations = turn_citations(answer, "What is the total?", steps)
    assert [(c.text, c.kind, c.run_id, c.code, c.source) for c in citations] == [
        ("410", "computed", "run_ok", "print(total)", None),
        ("12.5", "document", None, None, "[1] report.pdf, page 3"),
    ]  # 480 was printed by a failed run only: not traced
