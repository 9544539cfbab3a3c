"""InfiAgent-DABench's published format, read into evaluation questions.

Questions are a jsonl file (`id`, `question`, `constraints`, `format`, `file_name`,
`level`), labels another (`id`, `common_answers`: `[name, value]` pairs), and the
tables a folder of the files the questions name. Everything here comes from a user:
each line and field is checked, and a mistake is an `InvalidEvalSet` that says
which line is wrong.
"""

from __future__ import annotations

import json
from typing import Any

from backend.core.evals.questions import (
    ANSWER_NAME,
    QUESTION_ID,
    EvalQuestion,
    Expected,
)

MAX_QUESTIONS = 1000
MAX_TEXT = 8000  # characters of a question, its constraints or its format


class InvalidEvalSet(ValueError):
    """The set cannot be read; the message says why, for the user."""


def _lines(data: bytes, what: str) -> list[tuple[int, dict[str, Any]]]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InvalidEvalSet(f"The {what} file is not UTF-8 text.") from None
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise InvalidEvalSet(f"Line {number} of the {what} file is not JSON.") from None
        if not isinstance(row, dict):
            raise InvalidEvalSet(f"Line {number} of the {what} file is not a JSON object.")
        rows.append((number, row))
        if len(rows) > MAX_QUESTIONS:
            raise InvalidEvalSet(f"The {what} file has more than {MAX_QUESTIONS} lines.")
    if not rows:
        raise InvalidEvalSet(f"The {what} file has no lines.")
    return rows


def _text(row: dict[str, Any], key: str, number: int, *, required: bool = True) -> str:
    value = row.get(key, "")
    if not isinstance(value, str) or (required and not value.strip()):
        raise InvalidEvalSet(f"Line {number} of the questions file has no `{key}` text.")
    if len(value) > MAX_TEXT:
        raise InvalidEvalSet(f"Line {number}'s `{key}` is longer than {MAX_TEXT} characters.")
    return value


def _id(row: dict[str, Any], number: int, what: str) -> str:
    value = row.get("id")
    text = str(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else ""
    if QUESTION_ID.fullmatch(text) is None:
        raise InvalidEvalSet(f"Line {number} of the {what} file has no usable `id`.")
    return text


def _labels(data: bytes) -> dict[str, tuple[Expected, ...]]:
    labels: dict[str, tuple[Expected, ...]] = {}
    for number, row in _lines(data, "labels"):
        pairs = row.get("common_answers")
        if not isinstance(pairs, list) or not pairs:
            raise InvalidEvalSet(f"Line {number} of the labels file has no `common_answers`.")
        expected = []
        for pair in pairs:
            if (
                not isinstance(pair, list)
                or len(pair) != 2
                or not isinstance(pair[0], str)
                or ANSWER_NAME.fullmatch(pair[0]) is None
                or not isinstance(pair[1], (str, int, float))
            ):
                raise InvalidEvalSet(
                    f"Line {number} of the labels file: each answer is a [name, value] pair."
                )
            expected.append(Expected(pair[0], str(pair[1])[:200]))
        labels[_id(row, number, "labels")] = tuple(expected)
    return labels


def read_dabench(questions: bytes, labels: bytes, tables: set[str]) -> list[EvalQuestion]:
    """The questions, each with its labels; every file a question names must be in `tables`."""
    known = _labels(labels)
    read: list[EvalQuestion] = []
    seen: set[str] = set()
    for number, row in _lines(questions, "questions"):
        question_id = _id(row, number, "questions")
        if question_id in seen:
            raise InvalidEvalSet(f"Line {number}: question id {question_id} is there twice.")
        seen.add(question_id)
        if question_id not in known:
            raise InvalidEvalSet(f"Question {question_id} has no line in the labels file.")
        file_name = _text(row, "file_name", number)
        if file_name not in tables:
            raise InvalidEvalSet(
                f"Question {question_id} is over {file_name[:100]!r}, which is not among the "
                "tables sent."
            )
        level = row.get("level", "")
        read.append(
            EvalQuestion(
                id=question_id,
                question=_text(row, "question", number),
                files=(file_name,),
                expected=known[question_id],
                kind=level if isinstance(level, str) else "",
                constraints=_text(row, "constraints", number, required=False),
                format=_text(row, "format", number, required=False),
            )
        )
    return read
