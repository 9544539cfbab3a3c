"""The steps a message spells out, found from its sequencing words where they sequence.

One recogniser for the router (is this a multi-step task?) and for Plan-and-Execute's
steps on a model that cannot plan. A word sequences only at the start of a clause
(the message's start, after `, ; : . ! ?` or a line break, or after "and"):

- "then", "and then", "after that", "afterwards", "finally", "lastly" always do;
- "first", "next", "second", "third" are adjectives too ("the first 10 rows", "next
  week", "the second column"), so they sequence only at a clause start, never before
  a number ("First 10 rows"), and only with a comma after them ("First, …"), or, for
  "first", with a word of the first kind later on ("First load the file, then plot
  it"), or, for the others, after a sentence's end or an earlier sequencing word
  ("Load it. Next plot it."); "firstly", "secondly", "first of all" always do;
- a numbered list counting up from 1 ("1. load 2. plot") and a list of two or more
  "- " / "* " items, each item a step (a line before them ending with ":" introduces
  them and is dropped).

"then" after a clause that begins with "if" or "when" is a condition, not a step.
A message whose pieces are not at least two steps of two words or more is one step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_STEPS = 10

_ALWAYS = r"then|after\s+that|afterwards|finally|lastly|firstly|secondly|thirdly|first\s+of\s+all"
_ADJECTIVES = r"first|next|second|third"
_MARKER = re.compile(
    r"(?P<lead>^\s*|[,;:.!?]\s+|\n\s*|\s+and\s+|,\s*and\s+)"
    rf"(?P<word>{_ALWAYS}|{_ADJECTIVES})\b(?P<comma>\s*,)?",
    re.IGNORECASE,
)
_NUMBER_NEXT = re.compile(
    r"\s*(?:\d|(?:one|two|three|four|five|six|seven|eight|nine|ten|twenty|few|couple)\b)",
    re.IGNORECASE,
)
_CONDITION = re.compile(r"^\s*(?:if|when|whenever|unless)\b", re.IGNORECASE)
_NUMBERED = re.compile(r"(?:^|(?<=\s))(\d{1,2})[.)]\s+")
_BULLET = re.compile(r"^[ \t]*[-*\u2022][ \t]+", re.MULTILINE)
_STEP_BY_STEP = re.compile(r"\bstep[\s-]+by[\s-]+step\b", re.IGNORECASE)
_STEP_BY_STEP_OPENING = re.compile(r"^\s*step[\s-]+by[\s-]+step\s*[:,]", re.IGNORECASE)


@dataclass(frozen=True)
class Marker:
    """A sequencing word where it sequences: `start`/`end` span the clause boundary and the
    word (what is cut out), `word` is the word as written."""

    start: int
    end: int
    word: str


def _word(match: re.Match[str]) -> str:
    return " ".join(match.group("word").lower().split())


def _clause_before(text: str, start: int) -> str:
    """The clause that ends where a marker's lead begins."""
    boundary = max(text.rfind(mark, 0, start) for mark in ",;:.!?\n")
    return text[boundary + 1 : start]


def _after_a_sentence(text: str, match: re.Match[str]) -> bool:
    """The word opens a sentence that follows another ("Load it. Next plot it.")."""
    lead = match.group("lead").strip()
    return bool(text[: match.start()].strip()) and (lead in {".", ";", "!", "?", ""})


def sequencing_words(text: str) -> list[Marker]:
    """The sequencing words of `text` (see the module's rules), in order."""
    found = list(_MARKER.finditer(text))
    strong = [
        m
        for m in found
        if re.fullmatch(_ALWAYS, _word(m), re.IGNORECASE)
        and not (_word(m) == "then" and _CONDITION.match(_clause_before(text, m.start())))
    ]
    markers: list[Marker] = []
    for match in found:
        word = _word(match)
        if match in strong:
            pass
        elif word == "then":
            continue  # a condition's "then"
        elif _NUMBER_NEXT.match(text, match.end("word")):
            continue  # "first 10 rows", "next three weeks"
        elif match.group("comma"):
            pass  # "First, …"
        elif word == "first":
            if not any(m.start() > match.start() for m in strong):
                continue  # "First quarter sales?": nothing follows in sequence
        elif not (markers or _after_a_sentence(text, match)):
            continue  # "…, second column": nothing it goes on from
        markers.append(Marker(match.start(), match.end(), match.group("word")))
    return markers


def _numbered(text: str) -> list[Marker]:
    """The items of a list numbered 1, 2, 3 … in order (two at least)."""
    items: list[Marker] = []
    for match in _NUMBERED.finditer(text):
        if int(match.group(1)) == len(items) + 1:
            items.append(Marker(match.start(), match.end(), match.group(1)))
    return items if len(items) >= 2 else []


def _bullets(text: str) -> list[Marker]:
    items = [Marker(m.start(), m.end(), "-") for m in _BULLET.finditer(text)]
    return items if len(items) >= 2 else []


def _pieces(text: str, cuts: list[Marker]) -> list[str]:
    pieces, start = [], 0
    for cut in sorted(cuts, key=lambda c: c.start):
        pieces.append(text[start : cut.start])
        start = max(start, cut.end)
    pieces.append(text[start:])
    return pieces


def spelled_out_steps(text: str) -> list[str]:
    """The steps `text` spells out, in order; `[text]` when it spells out fewer than two."""
    lists = _numbered(text) or _bullets(text)
    cuts = lists + [m for m in sequencing_words(text) if not lists]
    pieces = _pieces(text, cuts)
    if lists and pieces[0].rstrip().endswith(":"):
        pieces = pieces[1:]  # "Do the following:" introduces the list
    goals = [_STEP_BY_STEP_OPENING.sub("", piece).strip(" \t\n,.;:") for piece in pieces]
    goals = [goal for goal in goals if len(goal.split()) >= 2]
    return goals[:MAX_STEPS] if len(goals) >= 2 else [text]


def asks_step_by_step(text: str) -> bool:
    return bool(_STEP_BY_STEP.search(text))
