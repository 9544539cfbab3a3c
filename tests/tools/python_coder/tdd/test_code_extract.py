"""Finding a function's code in replies written every which way."""

from __future__ import annotations

from backend.tools.python_coder.tdd.code_extract import extract_function, top_level_definitions


def test_a_fenced_block_among_prose() -> None:
    reply = "Sure! Here it is:\n```python\ndef double(x):\n    return 2 * x\n```\nEnjoy."
    assert extract_function(reply, "double").code == "def double(x):\n    return 2 * x\n"


def test_unfenced_code_between_prose_lines() -> None:
    reply = (
        "The function:\nimport math\n\ndef root(x):\n    return math.sqrt(x)\n\n"
        "It returns the square root."
    )
    extracted = extract_function(reply, "root")
    assert extracted.problems == []
    assert extracted.code == "import math\n\ndef root(x):\n    return math.sqrt(x)\n"


def test_example_calls_main_blocks_and_other_planned_functions_are_dropped() -> None:
    reply = """```python
import re

LIMIT = 10

def helper(x):
    return x

def parse(text):
    return [1]

def total(text):
    '''Sum it.'''
    return sum(parse(text))

example = total("1 2")
print(total("1"))

if __name__ == "__main__":
    print(total("3"))
```"""
    code = extract_function(reply, "total", ["parse", "total"]).code
    assert "def total" in code and "def helper" in code and "LIMIT = 10" in code
    assert "import re" in code and "'''Sum it.'''" in code
    assert "def parse" not in code and "print" not in code and "example" not in code


def test_a_python_block_is_preferred_over_other_blocks() -> None:
    reply = "```text\ndef f(): return 0\n```\n```python\ndef f():\n    return 1\n```"
    assert "return 1" in extract_function(reply, "f").code


def test_replies_without_the_function_say_why() -> None:
    assert extract_function("I cannot do that.", "f").problems == [
        "the reply has no valid Python code defining a function named `f`"
    ]
    assert extract_function("```python\ndef g():\n    pass\n```", "f").problems
    assert "async def" in extract_function("async def f():\n    pass", "f").problems[0]


def test_top_level_definitions_drop_the_docstring_and_future_import() -> None:
    module = '"""Doc."""\n\nfrom __future__ import annotations\n\nimport math\n\nX = 1\n'
    assert top_level_definitions(module) == "import math\n\nX = 1\n"
