"""The smart router: decides which agent answers a message, and records why.

For `agent_type: auto` a message is scored with the seeds' indicators: code and
data words ("python", "calculate", "csv", "pandas", …) and multi-step cues
("then", "first", "step by step"). A clear score decides alone; an unclear one
asks the model to classify (through a JSON-schema grammar where the backend has
one); a plain question goes to chat. An explicit agent type always wins.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from backend.llm.turn import StructuredReplyError, TurnLLM

AgentType = Literal["auto", "react", "plan_execute", "chat"]
Agent = Literal["react", "plan_execute", "chat"]
Classifier = Callable[[str], Awaitable[Agent | None]]


@dataclass(frozen=True)
class RouteDecision:
    agent_type: Agent
    reason: str


# Phrase -> weight. Phrases match as whole words, case-insensitively.
CODE_INDICATORS: dict[str, int] = {
    "write code": 3, "generate code": 3, "python": 3, "pandas": 3, "dataframe": 3,
    "csv": 3, "excel": 3, "xlsx": 3, "spreadsheet": 3, "parquet": 3, "json file": 3,
    "calculate": 2, "compute": 2, "plot": 2, "chart": 2, "graph": 2, "histogram": 2,
    "regression": 2, "correlation": 2, "statistics": 2, "column": 2, "columns": 2,
    "dataset": 2, "data": 1, "file": 1, "files": 1, "mean": 1, "average": 1, "median": 1,
    "sum": 1, "total": 1, "count": 1, "table": 1, "analyze": 1, "analyse": 1,
}  # fmt: skip
TOOL_INDICATORS: dict[str, int] = {
    "search the web": 3, "web search": 3, "look up": 2, "latest news": 2,
    "in the document": 2, "in my documents": 3, "according to the": 1, "cite": 1,
    "upload": 2, "uploaded": 2,
}  # fmt: skip
STEP_CUES: dict[str, int] = {
    "step by step": 2, "first": 1, "then": 1, "and then": 1, "after that": 2, "next": 1,
    "finally": 1, "afterwards": 1, "followed by": 1,
}  # fmt: skip

CLEAR = 3  # at or above: tools are needed without asking
PLAN_STEPS = 2  # at or above (with tools needed): plan first


Cues = list[tuple[str, int, re.Pattern[str]]]


def _cues(table: dict[str, int]) -> Cues:
    """Each phrase with its weight and its whole-word pattern, compiled once."""
    return [
        (phrase, weight, re.compile(r"(?<![\w])" + re.escape(phrase) + r"(?![\w])"))
        for phrase, weight in table.items()
    ]


_CODE, _TOOL, _STEPS = _cues(CODE_INDICATORS), _cues(TOOL_INDICATORS), _cues(STEP_CUES)


def _found(text: str, cues: Cues) -> list[tuple[str, int]]:
    # A substring test first: most phrases are absent, and it is far cheaper than the pattern.
    return [
        (phrase, weight)
        for phrase, weight, pattern in cues
        if phrase in text and pattern.search(text)
    ]


def _describe(found: list[tuple[str, int]]) -> str:
    return ", ".join(phrase for phrase, _ in found)


async def decide_route(
    requested: AgentType,
    message: str,
    *,
    has_files: bool = False,
    classify: Classifier | None = None,
) -> RouteDecision:
    """The agent for `message`; `classify` asks the model when the score is unclear."""
    if requested != "auto":
        return RouteDecision(requested, "requested explicitly")
    text = message.lower()
    tools = _found(text, _CODE) + _found(text, _TOOL)
    steps = _found(text, _STEPS)
    score = sum(weight for _, weight in tools)
    step_score = sum(weight for _, weight in steps)
    evidence = f"tool cues: {_describe(tools) or 'none'} (score {score})"
    if steps:
        evidence += f"; multi-step cues: {_describe(steps)}"
    if has_files:
        evidence += "; the session has files"
    if score >= CLEAR:
        if step_score >= PLAN_STEPS:
            return RouteDecision("plan_execute", f"{evidence}: plan the steps, then run them")
        return RouteDecision("react", f"{evidence}: reason and use tools")
    if score == 0 or (score == 1 and not has_files):
        return RouteDecision("chat", f"{evidence}: a plain question")
    # A weak cue with data at hand, or two weak cues: worth asking the model.
    fallback: Agent = "react" if has_files else "chat"
    if classify is None:
        return RouteDecision(fallback, f"{evidence}: unclear, no classifier; chose {fallback}")
    try:
        chosen = await classify(message)
    except Exception as exc:  # the model is optional here: the score still decides
        return RouteDecision(fallback, f"{evidence}: unclear; the model failed ({exc}), {fallback}")
    if chosen is None:
        return RouteDecision(fallback, f"{evidence}: unclear; the model did not say; {fallback}")
    return RouteDecision(chosen, f"{evidence}: unclear; the model classified it as {chosen}")


class _Classification(BaseModel):
    agent: Agent


_CLASSIFY = """[stage: route]
## INPUT
{message}
## TASK
Which agent should answer INPUT?
- chat: a plain question, answered from knowledge.
- react: needs tools: Python on the user's data files, their documents, or the web.
- plan_execute: a task with several steps that needs a plan first.
Reply with JSON: {{"agent": "chat" or "react" or "plan_execute"}}"""


def model_classifier(llm: TurnLLM) -> Classifier:
    """A classifier that asks `llm`; None when its reply is not a valid choice."""

    async def classify(message: str) -> Agent | None:
        prompt = _CLASSIFY.format(message=message[:2000])
        try:
            return (await llm.json("route", "", prompt, _Classification, max_tokens=20)).agent
        except StructuredReplyError:
            return None

    return classify
