"""Bounds on the JSON schemas a request may constrain a reply to.

A schema becomes a llama.cpp grammar (the embedded model builds it in this process;
Ollama builds one too), and a grammar grows with what the schema asks for: a
`maxLength: N` string is N nested optional rules. llama.cpp's grammar parser refuses
past about a thousand, and llama-cpp-python then crashes the whole process on the
refused grammar; far past it, building the grammar alone exhausts memory. So a
schema is checked before anything is built from it, with bounds that every real
client fits in (OpenAI's own structured outputs allow 10 levels of nesting and 1,000
enum values; the openai SDK's `parse` helper emits no lengths at all).
"""

from __future__ import annotations

import json
import re
from typing import Any

MAX_REPEAT = 1000  # minLength/maxLength, minItems/maxItems, a pattern's {m,n}
MAX_ENUM_VALUES = 1000  # `enum` values and `const`s, in the whole schema
MAX_DEPTH = 64  # objects and arrays nested in the schema document
MAX_BYTES = 64 * 1024  # the schema as compact JSON
# A pattern expanded: `(a{30}){30}` is 900 symbols, each nesting multiplies.
MAX_PATTERN_EXPANSION = 10_000

_REPEAT_KEYWORDS = ("minLength", "maxLength", "minItems", "maxItems")
_QUANTIFIER = re.compile(r"\{(\d+)(?:,(\d*))?\}")


class SchemaTooLarge(ValueError):
    """A schema past one of the bounds; the message says which, and where in it."""


def check_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Return `schema` if it is within the bounds, else raise `SchemaTooLarge`."""
    enum_values = _walk(schema, "", 1)  # first: it stops at MAX_DEPTH, json.dumps would not
    size = len(json.dumps(schema, separators=(",", ":")))
    if size > MAX_BYTES:
        raise SchemaTooLarge(f"the schema is {size} bytes as JSON, over the limit of {MAX_BYTES}")
    if enum_values > MAX_ENUM_VALUES:
        raise SchemaTooLarge(
            f"the schema has {enum_values} enum and const values, over the limit of "
            f"{MAX_ENUM_VALUES}"
        )
    return schema


def _walk(node: Any, where: str, depth: int) -> int:
    """Check `node` and everything in it; return its number of enum values."""
    if not isinstance(node, (dict, list)):
        return 0
    if depth > MAX_DEPTH:
        raise SchemaTooLarge(f"the schema nests deeper than {MAX_DEPTH} levels (at {where})")
    if isinstance(node, list):
        return sum(_walk(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(node))
    values = 0
    here = where or "the top level"
    for key, value in node.items():
        if key in _REPEAT_KEYWORDS and not _number(value) <= MAX_REPEAT:  # NaN too
            raise SchemaTooLarge(
                f"{key} {_short(value)} at {here} is over the limit of {MAX_REPEAT}"
            )
        if key == "pattern" and isinstance(value, str):
            _check_pattern(value, here)
        if key == "enum" and isinstance(value, list):
            values += len(value)
        elif key == "const":
            values += 1
        values += _walk(value, f"{where}.{key}" if where else str(key), depth + 1)
    return values


def _number(value: Any) -> int | float:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 24 else f"{text[:20]}..."


def _times(digits: str) -> int:
    """A quantifier's count; past 9 digits only "too many" matters (and `int()` of
    thousands of digits is refused)."""
    return int(digits) if len(digits) < 10 else 10**10


def _check_pattern(pattern: str, where: str) -> None:
    """Refuse a pattern whose `{m,n}` repetitions, nested, expand past the bounds."""
    for match in _QUANTIFIER.finditer(pattern):
        low, high = _times(match[1]), _times(match[2] or "0")
        if max(low, high) > MAX_REPEAT:
            raise SchemaTooLarge(
                f"the repetition {_short(match[0])} in the pattern at {where} is over the limit of "
                f"{MAX_REPEAT}"
            )
    if _expansion(pattern) > MAX_PATTERN_EXPANSION:
        raise SchemaTooLarge(
            f"the pattern at {where} repeats more than {MAX_PATTERN_EXPANSION} symbols in all"
        )


def _expansion(pattern: str) -> int:
    """How many symbols `pattern` spells out once its repetitions are written out (an
    upper bound: alternatives are added, not chosen among)."""
    groups: list[int] = [0]  # the running total of each open group
    last = 0  # the cost of the last atom, which a quantifier multiplies
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            last, i = 1, i + 2
        elif char == "[":
            end = i + 1
            while end < len(pattern) and pattern[end] != "]":
                end += 2 if pattern[end] == "\\" else 1
            last, i = 1, end + 1
        elif char == "(":
            groups.append(0)
            last, i = 0, i + 1
            continue
        elif char == ")" and len(groups) > 1:
            last, i = groups.pop(), i + 1
        elif quantifier := _QUANTIFIER.match(pattern, i):
            times = max(_times(quantifier[1]), _times(quantifier[2] or "0"))
            groups[-1] += last * (times - 1)
            last, i = last * times, quantifier.end()
            continue
        else:
            last, i = (0 if char in "|^$*+?" else 1), i + 1
        groups[-1] += last
    return sum(groups)
