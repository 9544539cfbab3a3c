"""Code extraction copes with what small models write."""

from __future__ import annotations

import pytest

from backend.tools.python_coder.extraction import extract_code


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("```python\nprint(1)\n```", "print(1)\n"),
        ("Sure!\n```py\nx = 1\n```\nthen\n```\nprint(x)\n```\nDone.", "x = 1\n\nprint(x)\n"),
        ("```python\nprint(1)\n", "print(1)\n"),  # the fence is never closed
        ("print(df['price'].mean())", "print(df['price'].mean())\n"),
        (">>> x = 2\n>>> print(x)", "x = 2\nprint(x)\n"),
        (
            "Here is how:\nimport pandas as pd\ndf = pd.read_csv('a.csv')\nfor c in df:\n"
            "    print(c)\nThis prints each column.",
            "import pandas as pd\ndf = pd.read_csv('a.csv')\nfor c in df:\n    print(c)\n",
        ),
        ("The answer is 5.", ""),
        ('```json\n{"a": 1}\n```', ""),
    ],
)
def test_extract_code(reply: str, expected: str) -> None:
    assert extract_code(reply) == expected


def test_blocks_that_only_parse_alone_keep_the_parsing_ones() -> None:
    reply = "```python\nprint(1)\n```\n```python\ndef broken(:\n```"
    assert extract_code(reply) == "print(1)\n"


def test_broken_code_is_returned_for_the_syntax_check_to_report() -> None:
    assert extract_code("```python\nprint(1\n```") == "print(1\n"
