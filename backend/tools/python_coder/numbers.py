"""The numbers a text states: where each one is, and which printed numbers it rounds from.

Two readers share this: the grounding check (an answer may state only numbers a
run printed) and provenance (which run and output line each stated number came
from). Both read an answer's *claims*: its numbers, less the ones that are not
statements about the data: numbered-list markers, link targets, file names,
citation marks like "[2]", and code in fenced blocks other than plain text.
Masking keeps every offset, so a claim's `start`/`end` index the answer itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?(?P<percent>\s?%)?")
_LIST_MARKER = re.compile(r"^(\s*)(\d+)([.)]\s)", re.MULTILINE)
_LINK_TARGET = re.compile(r"\]\([^)]*\)")  # a link's path; its text is still read
_CITATION_MARK = re.compile(r"\[\d+(?:\s*[,-–]\s*\d+)*\]")  # "[2]", "[1, 3]": a reference
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})([^\n]*)\n.*?(?:^\1\2[ \t]*$|\Z)", re.M | re.S)
_PLAIN_FENCES = {"", "text", "txt", "plain", "plaintext", "output", "console"}


@dataclass(frozen=True)
class Number:
    """One number as written: its text and span, its value, decimals, and a "%" after it."""

    text: str
    start: int
    end: int
    value: float
    decimals: int
    percent: bool = False

    @property
    def significant_digits(self) -> int:
        mantissa = re.split("[eE]", self.text.replace(",", ""))[0]
        return len(mantissa.lstrip("+-").replace(".", "").lstrip("0"))


def numbers_in(text: str) -> list[Number]:
    """Every number in `text`, in order ("1,234.5" is one number; "3 %" is 3 percent)."""
    found = []
    for match in _NUMBER.finditer(text):
        written = match.group(0)
        percent = match.group("percent") is not None
        if percent:
            written = written[: match.start("percent") - match.start()]
        plain = written.replace(",", "")
        try:
            value = float(plain)
        except ValueError:
            continue
        mantissa = re.split("[eE]", plain)[0]
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        end = match.start() + len(written)
        found.append(Number(written, match.start(), end, value, decimals, percent))
    return found


def _blank(text: str, start: int, end: int) -> str:
    return text[:start] + " " * (end - start) + text[end:]


def _blank_all(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: " " * len(m.group(0)), text)


def _without_list_markers(text: str) -> str:
    """Blank out "1. ", "2. ", … at line starts, but only while they count up from 1."""
    expected = [1]

    def blank(match: re.Match[str]) -> str:
        if int(match.group(2)) != expected[0]:
            return match.group(0)
        expected[0] += 1
        return match.group(1) + " " * (len(match.group(2)) + len(match.group(3)))

    return _LIST_MARKER.sub(blank, text)


def _without_code(text: str) -> str:
    """Fenced code is not a claim; a fence of plain text (a printed result) still is."""

    def blank(match: re.Match[str]) -> str:
        language = match.group(3).strip().lower()
        return match.group(0) if language in _PLAIN_FENCES else " " * len(match.group(0))

    return _FENCE.sub(blank, text)


def claims(answer: str, files: Sequence[str] = ()) -> list[Number]:
    """The numbers `answer` states about the data, with their spans in `answer`."""
    text = _blank_all(_without_code(_without_list_markers(answer)), _LINK_TARGET)
    text = _blank_all(text, _CITATION_MARK)
    for name in files:  # a file name ("plot_3.png") is not a claim
        for part in {name, name.rsplit("/", 1)[-1]}:
            start = text.find(part)
            while part and start >= 0:
                text = _blank(text, start, start + len(part))
                start = text.find(part, start + len(part))
    return numbers_in(text)


def rounds_from(claim: Number, source: float) -> bool:
    """`claim` is `source` as written to its decimals ("21.3" from 21.25; "42%" from 0.42)."""
    tolerance = 0.5 * 10.0**-claim.decimals + 1e-9 * abs(claim.value)
    if abs(claim.value - source) <= tolerance:
        return True
    return claim.percent and abs(claim.value - source * 100) <= tolerance


def same_number(claim: Number, source: Number) -> bool:
    """Written alike, up to thousands separators: "1,234" and "1234"."""
    return claim.value == source.value and claim.decimals == source.decimals
