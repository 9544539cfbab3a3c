"""Whether an output line supports the sentence a number of the answer stands in.

A number printed somewhere does not make every sentence that states it true: the
line "East  3112" does not support "Total units per region: 3112". So a claim is
cited to a line only when the line *supports* the claim's sentence (a table row of
the answer is one sentence; so is each line of a text block):

1. the line labels nothing: it holds numbers and no word (`3112`, `[3112 2000]`),
   so nothing on it says what the number is of; or
2. another number of the sentence is on the line too (the same record); or
3. a label of the line is a word of the sentence. A label is a word of two letters
   or more, less a few stopwords. Two words match when they are equal after
   lowercasing and a plural's "s"/"ies" is taken off, when one begins the other
   and the shorter has three letters or more ("max" and "maximum", "region" and
   "regional"), or when both are in one of a few groups of words that mean the
   same here (`_SAME`: total and sum, mean and average, max and highest, …).

"East sold 3112 units." is supported by "East  3112" (East); "Total units per
region: 3112" is not (neither "total", "units" nor "region" is on the line).
The rule reads words, not meaning: a sentence that names the line's label
still passes even if it says something else about it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

_LABEL = re.compile(r"[^\W\d_]{2,}")
# fmt: off
_STOPWORDS = frozenset({
    "the", "and", "for", "with", "are", "was", "were", "this", "that", "from", "has", "have",
    "had", "its", "per", "than", "into", "over", "under", "about", "which", "what", "when",
    "where", "there", "their", "they", "them", "then", "also", "each", "all", "any", "not",
    "but", "you", "your", "our", "out", "is", "of", "in", "to", "at", "on", "by", "an", "or",
    "as", "it", "be", "we", "so", "if", "up", "my", "me", "do", "am",
})
# Words that name the same figure in an answer and in printed output.
_SAME: tuple[frozenset[str], ...] = (
    frozenset({"total", "sum", "overall"}),
    frozenset({"mean", "average", "avg"}),
    frozenset({"max", "maximum", "highest", "largest", "biggest", "top", "most", "peak"}),
    frozenset({"min", "minimum", "lowest", "smallest", "least", "bottom"}),
    frozenset({"count", "number", "num", "cnt"}),
    frozenset({"std", "deviation", "stdev", "stddev", "sd"}),
    frozenset({"pct", "percent", "percentage", "share", "proportion", "ratio", "rate"}),
    frozenset({"median", "middle"}),
)
# fmt: on
_GROUP = {word: index for index, group in enumerate(_SAME) for word in group}
_MIN_PREFIX = 3


@functools.lru_cache(maxsize=4096)
def _stem(word: str) -> str:
    word = word.lower()
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def labels(text: str) -> frozenset[str]:
    """The words of `text` that can label a number, stemmed."""
    return frozenset(_stem(word) for word in _LABEL.findall(text) if word.lower() not in _STOPWORDS)


def _match(a: str, b: str) -> bool:
    if a == b:
        return True
    group = _GROUP.get(a)
    if group is not None and group == _GROUP.get(b):
        return True
    short, long = sorted((a, b), key=len)
    return len(short) >= _MIN_PREFIX and long.startswith(short)


def shares_a_label(line: Iterable[str], sentence: Iterable[str]) -> bool:
    """A label of the line matches a word of the sentence."""
    words = list(sentence)
    return any(_match(label, word) for label in line for word in words)


def supports(line_labels: frozenset[str], sentence_labels: frozenset[str], together: bool) -> bool:
    """The line supports the sentence (the module's rule); `together`: another number of
    the sentence is on the line."""
    return not line_labels or together or shares_a_label(line_labels, sentence_labels)
