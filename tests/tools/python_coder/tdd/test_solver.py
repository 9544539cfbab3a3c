"""The whole TDD mode with a scripted model and the real sandbox."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from backend.tools.python_coder.tdd import TDDSolution, solve_tdd
from backend.tools.python_coder.tdd.solver import functions_to_fix
from backend.tools.python_coder.tdd.specs import MAX_FUNCTIONS
from backend.tools.sandbox.executor import SandboxedExecutor
from tests.support.scripted_llm import scripted_llm

INSTRUCTION = "Give the mean of the numbers in a text like '1, 2.5 3'."

SPECS = {
    "functions": [
        {
            "name": "mean_of",
            "purpose": "the mean of the numbers in the text",
            "inputs": [{"name": "text", "type": "str", "description": "numbers"}],
            "outputs": "float",
            "dependencies": ["parse_numbers"],
            "complexity": "O(n)",
        },
        {
            "name": "parse_numbers",
            "purpose": "the numbers in a text, split by commas or spaces",
            "inputs": ["text: str"],
            "outputs": "list[float]",
            "dependencies": [],
            "complexity": "O(n)",
        },
    ]
}

PARSE_TESTS = {
    "tests": [
        {"description": "mixed separators", "kind": "normal", "inputs": {"text": "1, 2.5 3"},
         "expected": [1, 2.5, 3]},
        {"description": "empty text", "kind": "edge", "inputs": {"text": ""}, "expected": []},
        {"description": "a word", "kind": "error", "inputs": {"text": "1, x"},
         "expected": None, "expect_error": "ValueError"},
    ]
}  # fmt: skip

MEAN_TESTS = {
    "tests": [
        {"description": "four numbers", "kind": "normal", "inputs": {"text": "1 2 3 4"},
         "expected": 2.5},
        {"description": "float rounding", "kind": "edge", "inputs": {"text": "0.1, 0.2"},
         "expected": 0.15},
        {"description": "no numbers", "kind": "error", "inputs": {"text": ""},
         "expect_error": "ValueError"},
    ]
}  # fmt: skip

PARSE_WRONG = """Here is a first version:

def parse_numbers(text):
    return [float(part) for part in text.split(",")]

if __name__ == "__main__":
    print(parse_numbers("1,2"))
"""

MEAN = """```python
def parse_numbers(text):
    return [float(t) for t in text.replace(",", " ").split()]


def mean_of(text):
    numbers = parse_numbers(text)
    if not numbers:
        raise ValueError("there are no numbers in the text")
    return sum(numbers) / len(numbers)
```"""

PARSE_FIXED = """The split must accept commas and spaces:
```python
import re


def parse_numbers(text):
    parts = [part for part in re.split(r"[,\\s]+", text.strip()) if part]
    return [float(part) for part in parts]
```"""


def cached_files(cache_dir: Path) -> list[Path]:
    return sorted(cache_dir.glob("*.json"))


def tdd_replies() -> list[dict[str, Any]]:
    return [
        {"when": "[stage: tdd_specs]", "content": json.dumps(SPECS)},
        {
            "when": "[stage: tdd_tests] [function: parse_numbers]",
            "content": json.dumps(PARSE_TESTS),
        },
        {"when": "[stage: tdd_tests] [function: mean_of]", "content": json.dumps(MEAN_TESTS)},
        {"when": "[stage: tdd_implement] [function: parse_numbers]", "content": PARSE_WRONG},
        {"when": "[stage: tdd_implement] [function: mean_of]", "content": MEAN},
        {"when": "[stage: tdd_fix] [function: parse_numbers]", "content": PARSE_FIXED},
    ]


async def test_a_failing_function_is_fixed_and_the_solution_cached(
    executor: SandboxedExecutor, tmp_path: Path
) -> None:
    llm, model = scripted_llm(tdd_replies())
    cache_dir = tmp_path / "tdd_cache"
    solution = await solve_tdd(INSTRUCTION, llm, executor, cache_dir, settings_key={"t": 0})

    assert solution.error is None
    assert solution.all_tests_passed and not solution.cached
    assert solution.iterations == 1
    assert solution.order == ["parse_numbers", "mean_of"]
    assert [s.name for s in solution.function_specs] == ["mean_of", "parse_numbers"]
    assert [(t.function, t.kind) for t in solution.tests] == [
        ("parse_numbers", "normal"), ("parse_numbers", "edge"), ("parse_numbers", "error"),
        ("mean_of", "normal"), ("mean_of", "edge"), ("mean_of", "error"),
    ]  # fmt: skip
    assert all(r.passed for r in solution.test_results) and len(solution.test_results) == 6
    assert "re.split" in solution.implementations["parse_numbers"]
    assert "def parse_numbers" not in solution.implementations["mean_of"]  # its copy is dropped
    assert "__main__" not in solution.implementations["parse_numbers"]
    assert solution.llm_calls == llm.usage.calls == 6

    stages = [prompt.splitlines()[0] for prompt in model.prompts]
    assert stages[-1] == "[stage: tdd_fix] [function: parse_numbers]"  # mean_of waited for it
    fix_prompt = model.prompts[-1]
    assert "could not convert string to float: ' 2.5 3'" in fix_prompt
    assert "could not convert string to float: ''" in fix_prompt
    assert 'return [float(part) for part in text.split(",")]' in fix_prompt
    assert "a word" not in fix_prompt  # a passing test is not shown

    # The same instruction, model and settings: a cache hit, with no LLM call at all.
    replay, replay_model = scripted_llm([])
    hit = await solve_tdd(INSTRUCTION, replay, executor, cache_dir, settings_key={"t": 0})
    assert hit.cached and hit.llm_calls == 0 and replay.usage.calls == 0
    assert replay_model.prompts == []
    assert hit.model_dump(exclude={"cached", "llm_calls"}) == solution.model_dump(
        exclude={"cached", "llm_calls"}
    )
    (entry,) = cached_files(cache_dir)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert "re.split" in hit.code and hit.code.index("parse_numbers") < hit.code.index("mean_of")

    # Other settings are another key: this one asks the (now silent) model and fails cleanly.
    miss = await solve_tdd(INSTRUCTION, replay, executor, cache_dir, settings_key={"t": 1})
    assert not miss.cached and miss.error is not None and "ScriptExhausted" in miss.error


async def test_failing_solutions_are_not_cached(
    executor: SandboxedExecutor, tmp_path: Path
) -> None:
    stubborn = {
        "when": "[stage: tdd_fix] [function: parse_numbers]",
        "content": PARSE_WRONG,
        "repeat": True,
    }
    replies = [*tdd_replies()[:-1], stubborn]
    llm, model = scripted_llm(replies)
    solution = await solve_tdd(INSTRUCTION, llm, executor, tmp_path, max_iterations=2)
    assert solution.error is None and not solution.all_tests_passed
    assert solution.iterations == 2
    assert [p.splitlines()[0] for p in model.prompts].count(
        "[stage: tdd_fix] [function: parse_numbers]"
    ) == 2
    assert cached_files(tmp_path) == []


async def test_a_bad_specs_reply_is_retried_once_then_reported(
    executor: SandboxedExecutor, tmp_path: Path
) -> None:
    llm, model = scripted_llm(["I would rather chat.", "Still no JSON, sorry."])
    solution = await solve_tdd(INSTRUCTION, llm, executor, tmp_path)
    assert isinstance(solution, TDDSolution)
    assert solution.error is not None and "did not plan usable functions" in solution.error
    assert solution.llm_calls == 2 and not solution.all_tests_passed
    assert "could not be used: the reply is not a JSON object" in model.prompts[1]


async def test_a_dependency_cycle_is_sent_back_to_the_model(
    executor: SandboxedExecutor, tmp_path: Path
) -> None:
    cycle = {
        "functions": [{"name": "a", "dependencies": ["b"]}, {"name": "b", "dependencies": ["a"]}]
    }
    too_many = {"functions": [{"name": f"f{i}"} for i in range(MAX_FUNCTIONS + 1)]}
    llm, model = scripted_llm([json.dumps(cycle), json.dumps(too_many)])
    solution = await solve_tdd(INSTRUCTION, llm, executor, tmp_path)
    assert "a -> b -> a" in model.prompts[1]
    assert solution.error is not None and f"plan at most {MAX_FUNCTIONS}" in solution.error


def test_only_functions_whose_dependencies_pass_are_fixed() -> None:
    from backend.tools.python_coder.tdd import FunctionSpec, TestResult

    specs = [
        FunctionSpec(name="a"),
        FunctionSpec(name="b", dependencies=["a"]),
        FunctionSpec(name="c"),
    ]

    def result(function: str, passed: bool, ran: bool = True) -> TestResult:
        return TestResult(function=function, description="", passed=passed, ran=ran)

    failing_all = [result("a", False), result("b", False), result("c", False)]
    assert functions_to_fix(specs, ["a", "b", "c"], failing_all) == ["a", "c"]
    only_b = [result("a", True), result("b", False), result("c", False, ran=False)]
    assert functions_to_fix(specs, ["a", "b", "c"], only_b) == ["b"]


async def test_unusable_tests_are_dropped_and_an_empty_suite_retried(
    executor: SandboxedExecutor, tmp_path: Path
) -> None:
    suite = {
        "tests": [
            {"description": "positional", "inputs": ["1 2"], "expected": []},
            {"description": "wrong name", "inputs": {"txt": "1"}, "expected": [1]},
            {"description": "good", "inputs": {"text": "1"}, "expected": [1]},
        ]
    }
    specs = {"functions": [SPECS["functions"][1]]}
    replies = [
        json.dumps(specs),
        '{"tests": [{"inputs": "not a dict"}]}',
        json.dumps(suite),
        {"when": "[stage: tdd_implement]", "content": PARSE_FIXED},
    ]
    llm, model = scripted_llm(replies)
    solution = await solve_tdd(INSTRUCTION, llm, executor, tmp_path)
    assert "could not be used: the reply holds no usable tests" in model.prompts[2]
    assert [t.description for t in solution.tests] == ["good"]
    assert solution.all_tests_passed and solution.iterations == 0 and solution.llm_calls == 4
