"""The citations of an agent turn's answer, from the steps the turn streamed.

python_coder's successful executions are the runs an answer's numbers may come
from; the passages rag_retrieval showed the agent are what it may cite as [n].
`provenance.cite` does the tracing.
"""

from __future__ import annotations

from collections.abc import Sequence

from backend.core.agents.mcp_tools import is_mcp_tool
from backend.core.events import Citation, Code, Execution, PassageFound, StepEvent
from backend.tools.provenance import Passage, RunOutput, cite


def runs_of(steps: Sequence[StepEvent]) -> list[RunOutput]:
    """python_coder's successful runs, in order, each with the code that ran, then what
    the MCP servers' tools returned."""
    code: dict[tuple[int | None, int], str] = {}
    runs = []
    tools = []
    for step in steps:
        if isinstance(step, Execution) and step.ok and step.tool and is_mcp_tool(step.tool):
            tools.append(RunOutput(step.run_id, "", step.stdout, tool=step.tool))
        if not isinstance(step, Code | Execution) or step.tool != "python_coder":
            continue
        key = (step.index, step.attempt)
        if isinstance(step, Code):
            code[key] = step.code
        elif step.ok and step.run_id:
            runs.append(RunOutput(step.run_id, code.get(key, ""), step.stdout))
    return runs + tools


def passages_of(steps: Sequence[StepEvent]) -> list[Passage]:
    """The passages rag_retrieval showed the agent (the last search's, for a repeated [n])."""
    found: dict[int, Passage] = {}
    for step in steps:
        if isinstance(step, PassageFound):
            found[step.ref] = Passage(step.ref, step.where, " ".join(step.text.split()))
    return list(found.values())


def turn_citations(answer: str, question: str, steps: Sequence[StepEvent]) -> list[Citation]:
    files = sorted({f for s in steps if isinstance(s, Execution) for f in s.files})
    found = cite(
        answer, runs_of(steps), question=question, passages=passages_of(steps), files=files
    )
    return [Citation.model_validate(c) for c in found]
