"""The grounding check: an answer may state only numbers a run printed.

A stated number is grounded when a printed one rounds to it ("3.14" by "3.14159",
not "3.15"). Numbers from the question do not count: "is it above 100?" must not
ground "it is 100".
"""

from __future__ import annotations

from collections.abc import Sequence

from backend.tools.provenance.numbers import claims, numbers_in, rounds_from


def ungrounded_numbers(answer: str, output: str, files: Sequence[str] = ()) -> list[str]:
    """Numbers in `answer` that no number in `output` rounds to."""
    sources = [number.value for number in numbers_in(output)]
    return [
        f"{claim.value:g}"
        for claim in claims(answer, files)
        if not any(rounds_from(claim, source) for source in sources)
    ]
