"""User text never reaches FTS5 MATCH as syntax: every word is a quoted string."""

from __future__ import annotations

import pytest

from backend.tools.rag import match_expression, query_terms


def test_words_are_quoted_and_joined_with_or() -> None:
    assert match_expression("Revenue growth, 2023!") == '"revenue" OR "growth" OR "2023"'


def test_stop_words_are_dropped_unless_nothing_else_is_left() -> None:
    assert query_terms("What is the revenue of the company?") == ["revenue", "company"]
    assert query_terms("what is this") == ["what", "is", "this"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('"', None),
        ("*", None),
        ("-", None),
        ("   ", None),
        ("NEAR(", '"near"'),
        ("OR", '"or"'),
        ('col:term* -x ^y "open', '"col" OR "term" OR "x" OR "y" OR "open"'),
        ("snake_case", '"snake" OR "case"'),
    ],
)
def test_fts5_syntax_becomes_plain_words(query: str, expected: str | None) -> None:
    assert match_expression(query) == expected


def test_terms_are_distinct_bounded_and_unicode() -> None:
    assert query_terms("Café café CAFÉ") == ["café"]
    assert len(query_terms(" ".join(f"w{n}" for n in range(100)))) == 32
    assert query_terms("x" * 500) == ["x" * 64]
