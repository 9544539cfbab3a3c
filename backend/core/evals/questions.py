"""An evaluation question: asked over some files, answered in closed form.

The answer format is InfiAgent-DABench's: the model ends its answer with one
`@name[value]` per expected value, and each is compared with the expected one, a
number within its tolerance (scoring.py).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

QUESTION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
ANSWER_NAME = re.compile(r"^\w{1,64}$")
DEFAULT_TOLERANCE = 1e-6  # DABench's: a value is right within this of the label


@dataclass(frozen=True)
class Expected:
    """One named value the answer must give; numbers match within `tolerance` (absolute)."""

    name: str
    value: str
    tolerance: float = DEFAULT_TOLERANCE


@dataclass(frozen=True)
class EvalQuestion:
    id: str  # unique in its set
    question: str
    files: tuple[str, ...]  # file names in the set's folder, given to the session's uploads/
    expected: tuple[Expected, ...]
    kind: str = ""  # its type (the starter set's) or level (DABench's), for per-type scores
    constraints: str = ""
    format: str = ""  # how to write the answer; the default names every expected value
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def answer_format(self) -> str:
        if self.format:
            return self.format
        return " ".join(f"@{e.name}[value]" for e in self.expected)

    @property
    def prompt(self) -> str:
        """What the agent is asked: DABench's "Question / Constraints / Format" layout."""
        lines = [f"Question: {self.question}"]
        if self.constraints:
            lines.append(f"Constraints: {self.constraints}")
        lines.append(
            f"Format: {self.answer_format}. End your answer with these @name[value] "
            "lines, the values alone (no units)."
        )
        names = ", ".join(self.files)
        lines.append(f"The data is in {names}." if self.files else "")
        return "\n".join(line for line in lines if line)


def question_to_dict(question: EvalQuestion) -> dict[str, Any]:
    """The question as stored (the set's row keeps its questions as JSON)."""
    return asdict(question)


def question_from_dict(row: dict[str, Any]) -> EvalQuestion:
    return EvalQuestion(
        id=str(row["id"]),
        question=str(row["question"]),
        files=tuple(str(name) for name in row.get("files", ())),
        expected=tuple(
            Expected(str(e["name"]), str(e["value"]), float(e.get("tolerance", DEFAULT_TOLERANCE)))
            for e in row.get("expected", ())
        ),
        kind=str(row.get("kind", "")),
        constraints=str(row.get("constraints", "")),
        format=str(row.get("format", "")),
        notes={str(k): str(v) for k, v in row.get("notes", {}).items()},
    )
