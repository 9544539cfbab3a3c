"""Issue 41: an answer's `@name[value]` pairs scored against the expected values, the
Wilson interval, and DABench's files read (each mistake named by its line)."""

from __future__ import annotations

import json

import pytest

from backend.core.evals.dabench import InvalidEvalSet, read_dabench
from backend.core.evals.questions import EvalQuestion, Expected
from backend.core.evals.scoring import extract_answers, is_equal, score, wilson


def test_the_last_value_of_a_name_counts() -> None:
    assert extract_answers("@a[1] then @b[ x ] and @a[2]") == {"a": "2", "b": " x "}


@pytest.mark.parametrize(
    ("given", "expected", "right"),
    [
        ("4", Expected("n", "4"), True),
        (" 4.0000001 ", Expected("n", "4"), True),  # DABench's 1e-6
        ("4.01", Expected("n", "4"), False),
        ("12.34", Expected("n", "12.35", 0.01), True),  # one rounding unit apart
        ("12.33", Expected("n", "12.35", 0.01), False),
        ("2,081,990", Expected("n", "2081990"), True),
        ("$1,234.50", Expected("n", "1234.5"), True),
        ("paris", Expected("city", "Paris"), True),
        ("Lyon", Expected("city", "Paris"), False),
        ("nan", Expected("n", "nan"), True),  # equal as text
        ("inf", Expected("n", "1e309"), False),  # no infinite numbers
        (None, Expected("n", "4"), False),
    ],
)
def test_a_value_is_right_when_equal_or_within_its_tolerance(
    given: str | None, expected: Expected, right: bool
) -> None:
    assert is_equal(given, expected) is right


def test_a_question_is_right_when_all_its_values_are() -> None:
    question = EvalQuestion("q1", "?", ("t.csv",), (Expected("a", "1"), Expected("b", "x")))
    scored = score(question, "First @a[1], then @b[X].")
    assert (scored.correct, scored.values) == (True, {"a": True, "b": True})
    half = score(question, "@a[1]")
    assert (half.correct, half.values, half.extracted) == (
        False,
        {"a": True, "b": False},
        {"a": "1"},
    )
    assert "@a[value] @b[value]" in question.prompt and "t.csv" in question.prompt


def test_the_wilson_interval() -> None:
    low, high = wilson(7, 10)
    assert (round(low, 4), round(high, 4)) == (0.3968, 0.8922)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0
    assert wilson(0, 0) == (0.0, 1.0)


def _jsonl(*rows: object) -> bytes:
    return "\n".join(json.dumps(row) for row in rows).encode()


QUESTION = {"id": 5, "question": "Mean?", "format": "@m[v]", "file_name": "t.csv", "level": "easy"}
LABEL = {"id": 5, "common_answers": [["m", "2.5"]]}


def test_dabench_files_are_read_into_questions() -> None:
    (read,) = read_dabench(_jsonl(QUESTION), _jsonl(LABEL), {"t.csv"})
    assert (read.id, read.files, read.kind, read.format) == ("5", ("t.csv",), "easy", "@m[v]")
    assert read.expected == (Expected("m", "2.5"),)


Q = _jsonl(QUESTION)
L = _jsonl(LABEL)
MISTAKES = [
    (b"", L, "The questions file has no lines."),
    (b"\xff\xfe", L, "The questions file is not UTF-8 text."),
    (_jsonl(QUESTION, QUESTION), L, "Line 2: question id 5 is there twice."),
    (_jsonl([1]), L, "Line 1 of the questions file is not a JSON object."),
    (_jsonl({**QUESTION, "id": "../x"}), L, "Line 1 of the questions file has no usable `id`."),
    (_jsonl({**QUESTION, "id": 6}), L, "Question 6 has no line in the labels file."),
    (
        _jsonl({**QUESTION, "file_name": "u.csv"}),
        L,
        "Question 5 is over 'u.csv', which is not among the tables sent.",
    ),
    (
        _jsonl({**QUESTION, "question": ""}),
        L,
        "Line 1 of the questions file has no `question` text.",
    ),
    (
        Q,
        _jsonl({"id": 5, "common_answers": [["bad name", "1"]]}),
        "Line 1 of the labels file: each answer is a [name, value] pair.",
    ),
    (Q, _jsonl({"id": 5}), "Line 1 of the labels file has no `common_answers`."),
]


@pytest.mark.parametrize(("questions", "labels", "message"), MISTAKES)
def test_a_mistake_in_dabench_files_is_named(questions: bytes, labels: bytes, message: str) -> None:
    with pytest.raises(InvalidEvalSet) as refused:
        read_dabench(questions, labels, {"t.csv"})
    assert str(refused.value) == message
