"""The citations of an agent turn's answer, from the steps the turn streamed.

A turn's steps are its events (`code`, `execution`, …; see `core/agents/runner.py`).
python_coder's successful executions are the runs an answer's numbers may come
from; rag_retrieval's observations are the passages it may cite as [n].
`provenance.cite` does the tracing.
"""

from __future__ import annotations

import re
from typing import Any

from backend.tools.provenance import Passage, RunOutput, cite

_PASSAGE = re.compile(r"^\[(\d+)\] \(source: ([^)]*)\) (.*)$", re.MULTILINE)


def runs_of(steps: list[dict[str, Any]]) -> list[RunOutput]:
    """python_coder's successful runs, in order, each with the code that ran."""
    code: dict[tuple[Any, ...], str] = {}
    runs = []
    for step in steps:
        if step.get("tool") != "python_coder":
            continue
        key = (step.get("index"), step.get("attempt"))
        if step["type"] == "code":
            code[key] = str(step.get("code", ""))
        elif step["type"] == "execution" and step.get("ok") and step.get("run_id"):
            runs.append(RunOutput(str(step["run_id"]), code.get(key, ""), str(step["stdout"])))
    return runs


def passages_of(steps: list[dict[str, Any]]) -> list[Passage]:
    """The passages rag_retrieval showed the agent (the last search's, for a repeated [n])."""
    found: dict[int, Passage] = {}
    for step in steps:
        if step["type"] == "execution" and step.get("tool") == "rag_retrieval" and step.get("ok"):
            for ref, source, text in _PASSAGE.findall(str(step.get("stdout", ""))):
                found[int(ref)] = Passage(int(ref), source, text)
    return list(found.values())


def turn_citations(answer: str, question: str, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    files = sorted({f for s in steps if s["type"] == "execution" for f in s.get("files", [])})
    return cite(answer, runs_of(steps), question=question, passages=passages_of(steps), files=files)
