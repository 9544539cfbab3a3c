"""The smart router: decides which agent answers a message, and says why in plain words.

For `agent_type: auto` a message is scored with the seeds' indicators: code and
data words ("python", "calculate", "csv", "pandas", …) and tool words ("search
the web", "uploaded"). Whether it spells out several steps ("first …, then …",
"1. … 2. …") is read by `backend/core/sequencing.py`, the recogniser
Plan-and-Execute splits its steps with. A clear score decides alone; an unclear one
asks the model to classify (through a JSON-schema grammar where the backend has
one); a plain question goes to chat. A model that cannot route
(`ModelProfile.routes_itself` False) is never asked: with files in the session,
every message but small talk runs code. An explicit agent type always wins.

The reason is written for the user ("Your question mentions data (total, csv) and
the session has files, so an agent will run code."); the scores behind it go to
the log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel

from backend.core.sequencing import asks_step_by_step, sequencing_words, spelled_out_steps
from backend.core.small_talk import is_small_talk
from backend.llm.turn import StructuredReplyError, TurnLLM

logger = logging.getLogger(__name__)

AgentType = Literal["auto", "react", "plan_execute", "chat"]
Agent = Literal["react", "plan_execute", "chat"]
Classifier = Callable[[str], Awaitable[Agent | None]]


@dataclass(frozen=True)
class RouteDecision:
    agent_type: Agent
    reason: str  # for the user, in plain words


# Phrase -> weight. Phrases match as whole words, case-insensitively.
CODE_INDICATORS: dict[str, int] = {
    "write code": 3, "generate code": 3, "python": 3, "pandas": 3, "dataframe": 3,
    "csv": 3, "excel": 3, "xlsx": 3, "spreadsheet": 3, "parquet": 3, "json file": 3, "sql": 3,
    "database": 2,
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

CLEAR = 3  # at or above: tools are needed without asking

# What each agent will do, as the reason's ending says it.
_OUTCOME: dict[Agent, str] = {
    "react": "an agent will run code",
    "plan_execute": "an agent will plan the steps and run each one",
    "chat": "it is answered directly",
}
_JUDGED: dict[Agent, str] = {
    "react": "it needs code",
    "plan_execute": "it needs several steps",
    "chat": "it is a plain question",
}
SMALL_MODEL_WITH_FILES = "With files here and a small model, data questions always run code."


Cues = list[tuple[str, int, re.Pattern[str]]]


def _cues(table: dict[str, int]) -> Cues:
    """Each phrase with its weight and its whole-word pattern, compiled once."""
    return [
        (phrase, weight, re.compile(r"(?<![\w])" + re.escape(phrase) + r"(?![\w])"))
        for phrase, weight in table.items()
    ]


_CODE, _TOOL = _cues(CODE_INDICATORS), _cues(TOOL_INDICATORS)


def _found(text: str, cues: Cues) -> list[tuple[str, int]]:
    # A substring test first: most phrases are absent, and it is far cheaper than the pattern.
    return [
        (phrase, weight)
        for phrase, weight, pattern in cues
        if phrase in text and pattern.search(text)
    ]


def _listed(found: list[tuple[str, int]]) -> str:
    return ", ".join(phrase for phrase, _ in found)


@dataclass(frozen=True)
class _Reading:
    """What the router read in a message: its cues, their score, and its steps."""

    code: list[tuple[str, int]]
    tools: list[tuple[str, int]]
    steps: list[str]  # the sequencing words where they sequence
    several_steps: bool
    has_files: bool

    @property
    def score(self) -> int:
        return sum(weight for _, weight in self.code + self.tools)

    def mentions(self) -> str:
        """ "Your question mentions data (total, csv) and the session has files"."""
        parts = []
        if self.code:
            parts.append(f"data ({_listed(self.code)})")
        if self.tools:
            parts.append(f"tools ({_listed(self.tools)})")
        said = "Your question mentions " + " and ".join(parts)
        return said + (" and the session has files" if self.has_files else "")

    def detail(self) -> str:
        """The machine detail, for the log."""
        steps = ", ".join(self.steps) or ("several" if self.several_steps else "none")
        return (
            f"tool cues: {_listed(self.code + self.tools) or 'none'} (score {self.score}); "
            f"steps: {steps}; files: {self.has_files}"
        )


def _read(message: str, has_files: bool) -> _Reading:
    text = message.lower()
    return _Reading(
        code=_found(text, _CODE),
        tools=_found(text, _TOOL),
        steps=[marker.word.lower() for marker in sequencing_words(message)],
        several_steps=len(spelled_out_steps(message)) >= 2 or asks_step_by_step(message),
        has_files=has_files,
    )


def _decided(agent: Agent, reason: str, reading: _Reading) -> RouteDecision:
    logger.info("routed to %s: %s", agent, reading.detail())
    return RouteDecision(agent, reason)


async def decide_route(
    requested: AgentType,
    message: str,
    *,
    has_files: bool = False,
    classify: Classifier | None = None,
    routes_itself: bool = True,
) -> RouteDecision:
    """The agent for `message`; `classify` asks the model when the score is unclear.

    `routes_itself` False (`ModelProfile.routes_itself`): the model is never asked, and
    with files in the session every message but small talk goes to the code path.
    """
    if requested != "auto":
        return RouteDecision(requested, "requested explicitly")
    reading = _read(message, has_files)
    score = reading.score
    if score >= CLEAR:
        if reading.several_steps:
            steps = f" ({', '.join(reading.steps)})" if reading.steps else ""
            return _decided(
                "plan_execute",
                f"{reading.mentions()} and spells out several steps{steps}, "
                f"so {_OUTCOME['plan_execute']}.",
                reading,
            )
        ending = _OUTCOME["react"] if reading.code else "an agent will use its tools"
        return _decided("react", f"{reading.mentions()}, so {ending}.", reading)
    if not routes_itself and has_files:
        if is_small_talk(message) and not score:
            return _decided("chat", "This is small talk, so it is answered directly.", reading)
        return _decided("react", SMALL_MODEL_WITH_FILES, reading)
    if score == 0:
        files = " (nothing in it points at your files)" if has_files else ""
        return _decided(
            "chat", f"This is a plain question{files}, so it is answered directly.", reading
        )
    if score == 1 and not has_files:
        return _decided(
            "chat",
            f"This is a plain question (it mentions {_listed(reading.code + reading.tools)}, "
            "but the session has no files), so it is answered directly.",
            reading,
        )
    # A weak cue with data at hand, or two weak cues: worth asking the model.
    fallback: Agent = "react" if has_files else "chat"
    unclear = f"{reading.mentions()}, but not clearly"
    if classify is None or not routes_itself:
        return _decided(fallback, f"{unclear}, so {_OUTCOME[fallback]}.", reading)
    try:
        chosen = await classify(message)
    except Exception as exc:  # the model is optional here: the score still decides
        logger.warning("the router's model failed, so %s answers: %s", fallback, exc)
        return _decided(
            fallback,
            f"{unclear}; the model could not be asked, so {_OUTCOME[fallback]}.",
            reading,
        )
    if chosen is None:
        return _decided(
            fallback,
            f"{unclear}; the model gave no clear choice, so {_OUTCOME[fallback]}.",
            reading,
        )
    return _decided(
        chosen,
        f"{unclear}; the model judged that {_JUDGED[chosen]}, so {_OUTCOME[chosen]}.",
        reading,
    )


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
