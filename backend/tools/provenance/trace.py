"""Where each number of an answer came from: a run's output line, the question, a document.

`cite` reads the answer's claims (`numbers.claims`) and gives each one a citation:

- `question`: the user wrote this number ("above 100?"), so it proves nothing;
- `computed`: a run printed it, allowing for rounding (21.25 shown as 21.3);
  the citation names the run, its code and the output line;
- `document`: a passage the RAG tool found holds it (the answer cites it as [n]).

A number none of these hold gets no citation: it is never shown as traced. Nor
does a number whose sentence the line does not support (`support.py`: "East  3112"
does not support "Total units per region: 3112", but does "East sold 3112 units.").
When several output lines hold the number, the one whose words match the words
around it in the answer wins ("median" cites "median: 20.0", not "min: 20"),
then an exact rendering over a rounded one, then the latest run. Small numbers
("3", "0.5") turn up by chance in any output, so they are traced only to a line
that shares a word with their context or holds nothing but them.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from backend.tools.provenance import support
from backend.tools.provenance.numbers import (
    SENTENCE_END,
    Number,
    claims,
    numbers_in,
    rounds_from,
    same_number,
)

_WORD = re.compile(r"[^\W\d_]{3,}")
# fmt: off
_STOPWORDS = frozenset({
    "the", "and", "for", "with", "are", "was", "were", "this", "that", "from", "has", "have",
    "had", "its", "per", "than", "into", "over", "under", "about", "which", "what", "when",
    "where", "there", "their", "they", "them", "then", "also", "each", "all", "any", "not",
    "but", "you", "your", "our", "out",
})
# fmt: on
_DISTINCTIVE_DIGITS = 3  # "120", "21.3", "0.125": not a chance match
_MIN_LABEL_OVERLAP = 1


@dataclass(frozen=True)
class RunOutput:
    """A successful run: its id, its code and what it printed; or, with `tool`, what
    another tool (an MCP server's) returned, cited as "from tool <tool>"."""

    run_id: str
    code: str
    output: str
    tool: str = ""


@dataclass(frozen=True)
class Passage:
    """A document passage the answer may cite as [ref]."""

    ref: int
    source: str
    text: str


@dataclass(frozen=True)
class _Match:
    run: int
    line_number: int
    line: str
    overlap: int
    exact: bool

    def rank(self) -> tuple[int, bool, int, int]:
        """Better first: shared words, then exact, then the later run, then the earlier line."""
        return (self.overlap, self.exact, self.run, -self.line_number)


def _words(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(text)} - _STOPWORDS


@dataclass(frozen=True)
class _Context:
    """The words around a number in the answer: right before it (up to the previous
    number), right after it (up to the next), and in its whole sentence; and the other
    numbers of its sentence, which a line printing the same record holds too."""

    before: set[str]
    after: set[str]
    sentence: set[str]
    numbers: tuple[Number, ...] = ()
    labels: frozenset[str] = frozenset()  # the sentence's words as `support` reads them

    def shares_a_number(self, values: Sequence[float]) -> bool:
        """Another number of the sentence is among `values` (a line printing one record)."""
        return any(rounds_from(n, value) for n in self.numbers for value in values)

    def overlap(self, words: set[str], values: Sequence[float]) -> int:
        near = 2 * len(self.before & words) + len(self.after & words)
        together = sum(any(rounds_from(n, value) for value in values) for n in self.numbers)
        return near + len(self.sentence & words) + 2 * together


def _context(answer: str, claim: Number, neighbours: list[Number]) -> _Context:
    """`claim`'s context. A table row is one sentence: its cells label each other."""
    line_start = answer.rfind("\n", 0, claim.start) + 1
    line_end = answer.find("\n", claim.end)
    line_end = len(answer) if line_end < 0 else line_end
    line = answer[line_start:line_end]
    if line.lstrip().startswith("|"):
        row = tuple(n for n in neighbours if n is not claim and line_start <= n.start < line_end)
        return _Context(set(), set(), _words(line), row, support.labels(line))
    sentence_start = max(
        [line_start] + [m.end() for m in SENTENCE_END.finditer(answer, line_start, claim.start)]
    )
    ends = [m.start() + 1 for m in SENTENCE_END.finditer(answer, claim.end, line_end)]
    sentence_end = min([line_end, *ends])
    before_start = max(
        [sentence_start] + [n.end for n in neighbours if sentence_start <= n.end <= claim.start]
    )
    after_end = min(
        [sentence_end] + [n.start for n in neighbours if claim.end <= n.start <= sentence_end]
    )
    return _Context(
        before=_words(answer[before_start : claim.start]),
        after=_words(answer[claim.end : after_end]),
        sentence=_words(answer[sentence_start:sentence_end]),
        numbers=tuple(
            n for n in neighbours if n is not claim and sentence_start <= n.start < sentence_end
        ),
        labels=support.labels(answer[sentence_start:sentence_end]),
    )


class _Printed:
    """Every number the runs printed, sorted by value, so a claim finds its candidates by
    bisection instead of rescanning megabytes of output for each number of the answer."""

    def __init__(self, runs: Sequence[RunOutput]) -> None:
        entries: list[tuple[float, int, int, Number]] = []
        self.lines: dict[tuple[int, int], str] = {}
        self.values: dict[tuple[int, int], list[float]] = {}
        for index, run in enumerate(runs):
            for line_number, line in enumerate(run.output.splitlines(), start=1):
                found = numbers_in(line)
                if found:
                    self.lines[index, line_number] = line
                    self.values[index, line_number] = [n.value for n in found]
                entries.extend((n.value, index, line_number, n) for n in found)
        entries.sort(key=lambda entry: entry[0])
        self.sorted = [entry[0] for entry in entries]
        self.entries = entries
        self._words: dict[tuple[int, int], set[str]] = {}
        self._labels: dict[tuple[int, int], frozenset[str]] = {}

    def holding(self, claim: Number) -> dict[tuple[int, int], list[Number]]:
        """The lines with a number `claim` rounds from, and those numbers."""
        found: dict[tuple[int, int], list[Number]] = {}
        for low, high in claim.bounds:
            start = bisect.bisect_left(self.sorted, low - 1e-12)
            end = bisect.bisect_right(self.sorted, high + 1e-12)
            for _, run, line_number, number in self.entries[start:end]:
                if rounds_from(claim, number.value):
                    found.setdefault((run, line_number), []).append(number)
        return found

    def words(self, key: tuple[int, int]) -> set[str]:
        if key not in self._words:
            self._words[key] = _words(self.lines[key])
        return self._words[key]

    def labels(self, key: tuple[int, int]) -> frozenset[str]:
        if key not in self._labels:
            self._labels[key] = support.labels(self.lines[key])
        return self._labels[key]

    def bare(self, key: tuple[int, int]) -> bool:
        """The line prints one number and nothing to mistake it for."""
        return len(self.values[key]) == 1 and not self.words(key)


def _best_match(claim: Number, context: _Context, printed: _Printed) -> _Match | None:
    best: _Match | None = None
    chance = claim.significant_digits < _DISTINCTIVE_DIGITS
    for key, matching in printed.holding(claim).items():
        together = context.shares_a_number(printed.values[key])
        if not support.supports(printed.labels(key), context.labels, together):
            continue  # "East 3112" does not say "Total units per region: 3112"
        overlap = context.overlap(printed.words(key), printed.values[key])
        if chance and overlap < _MIN_LABEL_OVERLAP and not printed.bare(key):
            continue
        exact = any(same_number(claim, n) for n in matching)
        match = _Match(key[0], key[1], printed.lines[key].strip(), overlap, exact)
        if best is None or match.rank() > best.rank():
            best = match
    return best


def _cited_refs(answer: str, claim: Number) -> set[int]:
    """The [n] marks in the claim's sentence."""
    start = max([0] + [m.end() for m in SENTENCE_END.finditer(answer, 0, claim.start)])
    end_match = SENTENCE_END.search(answer, claim.end)
    end = len(answer) if end_match is None else end_match.end()
    return {int(ref) for ref in re.findall(r"\[(\d+)\]", answer[start:end])}


def _passage(answer: str, claim: Number, passages: Sequence[Passage]) -> Passage | None:
    holding = [p for p in passages if any(rounds_from(claim, n.value) for n in numbers_in(p.text))]
    cited = _cited_refs(answer, claim)
    holding.sort(key=lambda p: p.ref not in cited)
    return holding[0] if holding else None


def cite(
    answer: str,
    runs: Sequence[RunOutput],
    *,
    question: str = "",
    passages: Sequence[Passage] = (),
    files: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """A citation for each number of `answer` that can be traced, in order.

    Each is `{text, start, end, kind, run_id, code, output_line, line, source}`;
    `start`/`end` index `answer` (Python string offsets: code points).
    """
    found = claims(answer, files)
    asked = numbers_in(question)
    printed = _Printed(runs)
    cited: list[dict[str, Any]] = []
    for claim in found:
        base: dict[str, Any] = {
            "text": claim.text,
            "start": claim.start,
            "end": claim.end,
            "run_id": None,
            "code": None,
            "output_line": None,
            "line": None,
            "source": None,
        }
        if any(same_number(claim, number) for number in asked):
            cited.append({**base, "kind": "question", "source": "question"})
            continue
        match = _best_match(claim, _context(answer, claim, found), printed)
        if match is not None and runs[match.run].tool:
            source = f"tool {runs[match.run].tool}"
            cited.append(
                {**base, "kind": "tool", "source": source, "run_id": runs[match.run].run_id,
                 "output_line": match.line, "line": match.line_number}
            )  # fmt: skip
            continue
        if match is not None:
            run = runs[match.run]
            cited.append(
                {
                    **base,
                    "kind": "computed",
                    "run_id": run.run_id,
                    "code": run.code,
                    "output_line": match.line,
                    "line": match.line_number,
                }
            )
            continue
        passage = _passage(answer, claim, passages)
        if passage is not None:
            source = f"[{passage.ref}] {passage.source}"
            cited.append({**base, "kind": "document", "source": source})
    return cited
