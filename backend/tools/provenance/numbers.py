"""The numbers a text states: where each one is, and which printed numbers it rounds from.

Two readers share this: the grounding check (an answer may state only numbers a
run printed) and provenance (which run and output line each stated number came
from). Both read an answer's *claims*: its numbers, less the ones that are not
statements about the data: numbered-list markers, link targets, file names,
citation marks like "[2]", and code in fenced blocks other than plain text.
Masking keeps every offset, so a claim's `start`/`end` index the answer itself.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

_NUMBER = re.compile(
    r"(?<![\w.])(?P<digits>[-+\u2212]?\d+(?P<thousands>(?:,\d{3})+)?(?:\.(?P<fraction>\d+))?"
    r"(?:[eE](?P<exponent>[-+]?\d+))?)"
    r"(?:(?P<percent>\s?%|\s(?i:percent)\b)"
    r"|(?P<scale>[kKMB]\b|bn\b|mn\b|\s(?i:thousand|million|billion|trillion)\b))?"
)
_SIGNS = "+-\u2212"
# Lowercased: "k"/"K" is a thousand; "M", "mn" and "million" a million; "B", "bn" a billion.
_SCALES = {"k": 1e3, "m": 1e6, "mn": 1e6, "b": 1e9, "bn": 1e9, "thousand": 1e3}
_SCALES.update(million=1e6, billion=1e9, trillion=1e12)
# Words that put a number's sign in the sentence: "fell by 5.2%" states -5.2% as 5.2.
_FALL = re.compile(
    r"\b(?:f[ae]ll(?:s|en|ing)?|drop(?:s|ped|ping)?|decreas\w*|declin\w*|lower\w*|"
    r"los(?:s|ses|t|e|es|ing)|down|below|negative|minus|reduc\w*|shr[aiu]nk\w*|deficit|"
    r"dip(?:s|ped)?|plung\w*|slump\w*|contract(?:ed|ion|s)?)\b",
    re.IGNORECASE,
)
_FALL_WINDOW = 60  # characters before a number, within its sentence
SENTENCE_END = re.compile(r"[.!?](?:\s|$)|\n")
_LIST_MARKER = re.compile(r"^(\s*)(\d+)([.)]\s)", re.MULTILINE)
_LINK_TARGET = re.compile(r"\]\([^)]*\)")  # a link's path; its text is still read
_CITATION_MARK = re.compile(r"\[\d+(?:\s*[,-–]\s*\d+)*\]")  # "[2]", "[1, 3]": a reference
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})([^\n]*)\n.*?(?:^\1\2[ \t]*$|\Z)", re.M | re.S)
_PLAIN_FENCES = {"", "text", "txt", "plain", "plaintext", "output", "console"}


@dataclass(frozen=True)
class Number:
    """One number as written: its text and span (the digits), its value, its decimals,
    a "%" after it, and the scale a word after it gives ("1.2 million" is 1.2e6)."""

    text: str
    start: int
    end: int
    value: float
    decimals: int
    percent: bool = False
    scale: float = 1.0
    magnitude: bool = False  # stated as a size of a fall ("fell by 5.2%"): its sign is in words

    @property
    def significant_digits(self) -> int:
        mantissa = re.split("[eE]", self.text.replace(",", ""))[0]
        return len(mantissa.lstrip(_SIGNS).replace(".", "").lstrip("0"))

    @functools.cached_property
    def bounds(self) -> tuple[tuple[float, float], ...]:
        """The ranges a printed value must fall in for this number to be it as written:
        rounded to its decimals (and scale), as a percentage of a printed fraction, and,
        for a fall's size, as a magnitude ("fell 5.2%" from -0.052)."""
        tolerance = 0.5 * 10.0**-self.decimals * self.scale + 1e-9 * abs(self.value)
        ranges = {(self.value - tolerance, self.value + tolerance)}
        if self.percent:
            ranges.add(((self.value - tolerance) / 100, (self.value + tolerance) / 100))
        if self.magnitude and self.text[0] not in _SIGNS:
            ranges |= {(-high, -low) for low, high in ranges}
        return tuple(sorted(ranges))


def numbers_in(text: str) -> list[Number]:
    """Every number in `text`, in order ("1,234.5" is one number; "3 %" is 3 percent;
    "1.2 million" and "4.5k" are scaled; a minus sign may be U+2212, as typeset)."""
    found = []
    for match in _NUMBER.finditer(text):
        written, thousands, fraction, exponent, percent, scaled = match.group(
            "digits", "thousands", "fraction", "exponent", "percent", "scale"
        )
        plain = written.replace(",", "") if thousands else written
        try:
            value = float(plain.replace("\u2212", "-"))
        except ValueError:
            continue
        scale = _SCALES[scaled.strip().lower()] if scaled else 1.0
        start = match.start()
        found.append(
            Number(
                written,
                start,
                start + len(written),
                value * scale,
                # "1.5e-05" is written to 6 decimals, "1.5e3" to -2 (the nearest hundred)
                (len(fraction) if fraction else 0) - (int(exponent) if exponent else 0),
                percent is not None,
                scale,
            )
        )
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
    return [
        replace(number, magnitude=True) if _after_a_fall(text, number) else number
        for number in numbers_in(text)
    ]


def _after_a_fall(text: str, number: Number) -> bool:
    """A word of falling comes before `number` in its sentence ("a drop of 12%")."""
    window = text[max(0, number.start - _FALL_WINDOW) : number.start]
    ends = list(SENTENCE_END.finditer(window))
    return bool(_FALL.search(window, ends[-1].end() if ends else 0))


def rounds_from(claim: Number, source: float) -> bool:
    """`claim` is `source` as written ("21.3" from 21.25; "42%" from 0.42; "1.2 million"
    from 1234567; "fell by 5" from -5)."""
    return any(low <= source <= high for low, high in claim.bounds)


def same_number(claim: Number, source: Number) -> bool:
    """Written alike, up to thousands separators: "1,234" and "1234"."""
    return claim.value == source.value and claim.decimals == source.decimals
