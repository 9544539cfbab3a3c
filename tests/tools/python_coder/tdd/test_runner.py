"""Running tests in the real sandbox: error cases, pandas values, hangs, rejected code."""

from __future__ import annotations

from typing import Any

from backend.tools.python_coder.tdd.code_extract import Implementation
from backend.tools.python_coder.tdd.harness import build_program, indent_code
from backend.tools.python_coder.tdd.models import TestCase
from backend.tools.python_coder.tdd.runner import run_tests
from backend.tools.sandbox.ast_check import check_code
from backend.tools.sandbox.executor import SandboxedExecutor


def case(function: str, inputs: dict[str, Any], expected: Any = None, **extra: Any) -> TestCase:
    description = extra.pop("description", f"{function}({inputs})")
    return TestCase(
        function=function, description=description, inputs=inputs, expected=expected, **extra
    )


def code(**functions: str) -> dict[str, Implementation]:
    return {name: Implementation(code=source) for name, source in functions.items()}


RATIO = """
import json

def ratio(a, b):
    if b == 0:
        raise ZeroDivisionError("b is zero")
    if a < 0:
        json.loads("not json")
    return a / b
"""


async def test_error_cases_pass_when_that_exception_or_a_subclass_is_raised(
    executor: SandboxedExecutor,
) -> None:
    cases = [
        case("ratio", {"a": 1, "b": 0}, expect_error="ZeroDivisionError"),
        case("ratio", {"a": 1, "b": 0}, expect_error="ArithmeticError"),  # a base class
        case(
            "ratio", {"a": -1, "b": 1}, expect_error="builtins.ValueError: bad"
        ),  # JSONDecodeError
        case("ratio", {"a": 1, "b": 0}, expect_error="ValueError"),
        case("ratio", {"a": 1, "b": 2}, expect_error="ValueError"),
        case("ratio", {"a": 1, "b": 3}, 1 / 3),
        case("ratio", {"a": 1, "b": 0}, 0),
    ]
    results = await run_tests(executor, code(ratio=RATIO), ["ratio"], cases)
    assert [r.passed for r in results] == [True, True, True, False, False, True, False]
    assert results[0].actual == {"$raised": "ZeroDivisionError: b is zero"}
    assert results[3].error == "expected ValueError to be raised, got ZeroDivisionError: b is zero"
    assert results[4].error == "expected ValueError to be raised, but it returned a value"
    assert results[4].actual == 0.5
    assert results[6].error == "ZeroDivisionError: b is zero"


async def test_pandas_and_nan_values_travel_both_ways(executor: SandboxedExecutor) -> None:
    source = (
        "import pandas as pd\n\n"
        "def totals(frame):\n"
        "    print('summing', len(frame))\n"
        "    return frame.groupby('k', as_index=False)['v'].sum()\n\n"
        "def first(values):\n"
        "    return values[0]\n"
    )
    frame = {"$dataframe": {"k": ["a", "b", "a"], "v": [1.5, 2, float("nan")]}}
    cases = [
        case("totals", {"frame": frame}, {"$dataframe": {"k": ["a", "b"], "v": [1.5, 2.0]}}),
        case("totals", {"frame": frame}, {"k": ["a", "b"], "v": [1.5, 3.0]}),
        case("first", {"values": [{"$float": "nan"}, 1]}, {"$float": "nan"}),
    ]
    implementations = {
        "totals": Implementation(code=source.split("def first")[0]),
        "first": Implementation(code="def first" + source.split("def first")[1]),
    }
    results = await run_tests(executor, implementations, ["totals", "first"], cases)
    assert [r.passed for r in results] == [True, False, True]
    assert results[0].output == "summing 3\n"
    assert results[1].actual == {"$dataframe": {"k": ["a", "b"], "v": [1.5, 2.0]}}
    assert results[1].error == "the result differs from the expected value"
    assert results[2].actual == {"$float": "nan"}


async def test_a_hanging_test_fails_and_the_rest_are_reported_as_not_run(
    executor: SandboxedExecutor,
) -> None:
    source = "def wait(n):\n    while n > 0:\n        pass\n    return n\n"
    cases = [case("wait", {"n": 0}, 0), case("wait", {"n": 1}, 1), case("wait", {"n": 0}, 0)]
    results = await run_tests(executor, code(wait=source), ["wait"], cases, run_timeout=1)
    assert [(r.passed, r.ran) for r in results] == [(True, True), (False, True), (False, False)]
    assert "TimeoutError" in (results[1].error or "")
    assert results[2].error == "not run: an earlier test stopped the run"


async def test_rejected_code_is_not_run_and_its_callers_name_it(
    executor: SandboxedExecutor,
) -> None:
    implementations = {
        "listing": Implementation(code="import os\n\ndef listing():\n    return os.listdir()\n"),
        "count": Implementation(code="def count():\n    return len(listing())\n"),
        "missing": Implementation(problems=["the reply has no valid Python code"]),
    }
    cases = [case("listing", {}, []), case("count", {}, 0), case("missing", {}, 1)]
    results = await run_tests(executor, implementations, ["listing", "count", "missing"], cases)
    assert not any(r.passed for r in results)
    assert "import of 'os' is not allowed" in (results[0].error or "")
    assert results[1].error == "NotImplementedError: listing could not run; see its own tests"
    assert results[2].error == "the code was not run: the reply has no valid Python code"


async def test_a_function_that_fails_to_load_is_blamed(executor: SandboxedExecutor) -> None:
    implementations = code(
        fine="def fine():\n    return 1\n",
        broken="LIMIT = 1 / 0\n\ndef broken():\n    return LIMIT\n",
    )
    cases = [case("fine", {}, 1), case("broken", {}, 1)]
    results = await run_tests(executor, implementations, ["fine", "broken"], cases)
    assert [(r.passed, r.ran) for r in results] == [(False, False), (False, True)]
    assert (results[1].error or "").startswith("defining `broken` failed:")
    assert "ZeroDivisionError" in (results[1].error or "")


async def test_multi_line_strings_keep_their_text(executor: SandboxedExecutor) -> None:
    source = 'def poem():\n    return """roses\n  are red"""\n'
    results = await run_tests(
        executor, code(poem=source), ["poem"], [case("poem", {}, "roses\n  are red")]
    )
    assert results[0].passed, results[0]


async def test_runs_leave_the_session_as_it_was(executor: SandboxedExecutor) -> None:
    assert (await executor.run("total = 41")).success
    source = "total = 0\n\ndef total_of(items):\n    return sum(items)\n"
    results = await run_tests(
        executor, code(total_of=source), ["total_of"], [case("total_of", {"items": [1, 2]}, 3)]
    )
    assert results[0].passed
    after = await executor.run("print(total, [n for n in globals() if 'tdd' in n])")
    assert after.stdout == "41 []\n"


def test_the_program_passes_the_pre_filter_itself() -> None:
    cases = [case("f", {"x": [1, float("nan")]}, {"$float": "nan"})]
    program = build_program({"f": "def f(x):\n    return x\n"}, ["f"], cases)
    assert check_code(program.code) == []
    assert program.code.count(program.result_marker) == 1


def test_indenting_leaves_multi_line_strings_alone() -> None:
    source = 'def f():\n    text = """a\nb"""\n    return f"""{text}\nc"""\n'
    assert indent_code(source, "  ") == (
        '  def f():\n      text = """a\nb"""\n      return f"""{text}\nc"""'
    )
