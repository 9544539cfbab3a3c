"""Verified answers as worked examples: which are like a new question, the queries a
run's code makes, and whether new code reuses an example's query.

A verified answer is a question a user checked the answer to, with the code that answered
it and the queries that code made. A later question about the same source gets the most
similar ones in the coder's prompt; an answer whose code runs one of their queries says
that it reuses it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from backend.files.ranking import tokens

MAX_EXAMPLES = 2
MIN_SIMILARITY = 0.3  # of the question's words and the example's (Jaccard)
MAX_CODE_CHARS = 1500
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Example:
    id: str
    source: str  # the source's name, as code names it
    question: str
    code: str
    queries: list[str]


@dataclass(frozen=True)
class SourcesPrompt:
    """What the coder's prompt carries of a session's data sources: the tables a question
    needs with their notes and the verified answers like it (`text`), and those answers."""

    text: str = ""
    examples: list[Example] = field(default_factory=list)


def similarity(question: str, other: str) -> float:
    mine, theirs = tokens(question), tokens(other)
    if not mine or not theirs:
        return 0.0
    return len(mine & theirs) / len(mine | theirs)


def most_similar(question: str, examples: Sequence[Example]) -> list[Example]:
    scored = [(similarity(question, e.question), i, e) for i, e in enumerate(examples)]
    kept = [item for item in scored if item[0] >= MIN_SIMILARITY]
    return [example for _, _, example in sorted(kept, key=lambda item: (-item[0], item[1]))][
        :MAX_EXAMPLES
    ]


def queries_in(code: str) -> list[tuple[str, str]]:
    """The `sql(source, query)` calls in `code` whose arguments are written out: (source,
    query) each, in order."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "sql"
            and len(node.args) == 2
            and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args)
        ):
            source, query = (a.value for a in node.args)  # type: ignore[attr-defined]
            found.append((source, query))
    return found


def _normal(query: str) -> str:
    return _SPACE.sub(" ", query).strip().rstrip(";").lower()


def reused(code: str, examples: Sequence[Example]) -> list[Example]:
    """The examples one of whose queries `code` runs (spacing and case aside)."""
    ran = {(source, _normal(query)) for source, query in queries_in(code)}
    return [
        example
        for example in examples
        if any((example.source, _normal(query)) in ran for query in example.queries)
    ]


def describe(examples: Sequence[Example]) -> str:
    parts = []
    for example in examples:
        code = example.code
        if len(code) > MAX_CODE_CHARS:
            code = code[:MAX_CODE_CHARS] + "\n# …"
        parts.append(f"Question: {example.question}\n```python\n{code}\n```")
    return (
        "Verified answers to similar questions (checked by a person): reuse their queries"
        " where they fit.\n\n" + "\n\n".join(parts)
    )


def reuse_note(examples: Sequence[Example]) -> str:
    """What an answer adds when its code reused verified answers' queries."""
    questions = "; ".join(f"“{example.question}”" for example in examples)
    return f"\n\n(This answer reuses the query of a verified answer to {questions}.)"
