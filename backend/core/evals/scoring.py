"""Scoring an answer against its expected values, and a score's confidence interval.

Extraction is InfiAgent-DABench's: every `@name[value]` in the answer, a repeated name
keeping its last value. A value is right when it equals the expected one (both
stripped, case-insensitive for words), or both parse as numbers within the
expected value's tolerance. A question is right when all of its values are.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from backend.core.evals.questions import EvalQuestion, Expected

_ANSWER = re.compile(r"@(\w+)\[(.*?)\]")  # DABench's own extraction pattern
_NUMBER_NOISE = re.compile(r"[,%$€£\s]")


@dataclass(frozen=True)
class Scored:
    correct: bool
    extracted: dict[str, str]
    values: dict[str, bool]  # each expected name: right or not


def extract_answers(text: str) -> dict[str, str]:
    """The `@name[value]` pairs in `text`; a repeated name keeps its last value."""
    return dict(_ANSWER.findall(text))


def _number(text: str) -> float | None:
    try:
        value = float(_NUMBER_NOISE.sub("", text))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def is_equal(answer: str | None, expected: Expected) -> bool:
    if answer is None:
        return False
    given, wanted = answer.strip(), expected.value.strip()
    if given.casefold() == wanted.casefold():
        return True
    a, b = _number(given), _number(wanted)
    if a is None or b is None:
        return False
    # A hair over the tolerance: 12.35 against 12.34 is 0.0100000000000016 apart.
    return abs(a - b) <= expected.tolerance + 1e-9 * max(1.0, abs(a), abs(b))


def score(question: EvalQuestion, answer: str) -> Scored:
    extracted = extract_answers(answer)
    values = {e.name: is_equal(extracted.get(e.name), e) for e in question.expected}
    return Scored(bool(values) and all(values.values()), extracted, values)


def wilson(right: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of `right` out of `total` (95% by default): the range a
    model's true accuracy lies in, honest for small sets and for 0 or all right."""
    if total <= 0:
        return 0.0, 1.0
    p = right / total
    centre = p + z * z / (2 * total)
    margin = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total))
    scale = 1 + z * z / total
    return max(0.0, (centre - margin) / scale), min(1.0, (centre + margin) / scale)
