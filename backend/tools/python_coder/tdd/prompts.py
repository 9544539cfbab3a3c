"""The TDD mode's prompts.

Every prompt starts with a line `[stage: tdd_<step>]`, followed on the same
line by `[function: <name>]` for the per-function steps, so the prompt log
reads clearly and scripted test models can pick replies by stage and
function. Other functions are only ever mentioned by signature, never in that
bracket form.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from backend.tools.python_coder.tdd.models import FunctionSpec, TestCase, TestResult
from backend.tools.python_coder.tdd.specs import MAX_FUNCTIONS
from backend.tools.sandbox.ast_check import ALLOWED_MODULES

MIN_TESTS = 3
MAX_TESTS = 8
_MAX_FAILURES_SHOWN = 6

SYSTEM = (
    "You are a careful Python engineer who works test-first: plan small pure functions, "
    "write their tests, then implement them. Follow the requested reply format exactly."
)

_PACKAGES = ", ".join(sorted(ALLOWED_MODULES))

_TAGS = (
    'JSON cannot hold some Python values; write them as tagged objects: {"$float": "nan"} '
    '(also "inf", "-inf"), {"$tuple": [...]}, {"$set": [...]}, {"$ndarray": [...]}, '
    '{"$series": [...]}, {"$dataframe": {"column": [values, ...]}}.'
)

_SPECS_FORMAT = """{"functions": [{"name": "snake_case_name", "purpose": "what it does",
  "inputs": [{"name": "param", "type": "str", "description": "..."}],
  "outputs": "the type and meaning of the return value",
  "dependencies": ["names of other planned functions it calls"],
  "complexity": "e.g. O(n)"}]}"""

_TESTS_FORMAT = """{"tests": [{"description": "...", "kind": "normal",
  "inputs": {"param": "value"}, "expected": "the return value", "expect_error": null}]}"""


def stage_line(stage: str, function: str | None = None) -> str:
    line = f"[stage: tdd_{stage}]"
    return f"{line} [function: {function}]" if function else line


def specs_prompt(instruction: str, feedback: str | None = None) -> str:
    return "\n".join(
        [
            stage_line("specs"),
            "Plan small, pure Python functions that together solve this task.",
            "",
            f"Task:\n{instruction}",
            "",
            "Reply with only a JSON object of this form:",
            _SPECS_FORMAT,
            "",
            "Rules:",
            f"- 1 to {MAX_FUNCTIONS} functions; the last one solves the whole task.",
            "- Each function gets everything through its inputs and returns a value: "
            "no files, no printing, no global state.",
            "- Dependencies list only planned functions and must not form a cycle.",
            f"- Only these packages may be used: {_PACKAGES}.",
            *_feedback(feedback),
        ]
    )


def tests_prompt(
    spec: FunctionSpec, dependencies: Sequence[FunctionSpec], feedback: str | None = None
) -> str:
    names = ", ".join(spec.parameter_names) or "none"
    return "\n".join(
        [
            stage_line("tests", spec.name),
            "Write unit tests for this function before it is implemented.",
            "",
            describe(spec),
            *_callable(dependencies),
            "",
            "Reply with only a JSON object of this form:",
            _TESTS_FORMAT,
            "",
            "Rules:",
            f"- {MIN_TESTS} to {MAX_TESTS - 2} tests, of each kind: normal cases, edge cases "
            "(empty, single item, boundaries) and error cases.",
            f"- `inputs` maps parameter names ({names}) to values.",
            '- An error case sets `expect_error` to the exception class name (e.g. "ValueError") '
            "and leaves `expected` null.",
            "- Work each expected value out carefully; floats are compared with a relative "
            "tolerance of 1e-6.",
            f"- {_TAGS}",
            *_feedback(feedback),
        ]
    )


def implement_prompt(
    spec: FunctionSpec, dependencies: Sequence[FunctionSpec], tests: Sequence[TestCase]
) -> str:
    return "\n".join(
        [
            stage_line("implement", spec.name),
            "Implement this function so that its tests pass.",
            "",
            describe(spec),
            *_callable(dependencies),
            "",
            "Its tests (inputs, then the expected value or exception):",
            *(f"- {_case_line(case)}" for case in tests),
            "",
            *_code_rules(),
            "Reply with the complete function in one ```python code block.",
        ]
    )


def fix_prompt(
    spec: FunctionSpec,
    dependencies: Sequence[FunctionSpec],
    code: str,
    failures: Sequence[tuple[TestCase, TestResult]],
) -> str:
    shown = failures[:_MAX_FAILURES_SHOWN]
    return "\n".join(
        [
            stage_line("fix", spec.name),
            f"The implementation of `{spec.name}` fails {len(failures)} of its tests. Fix it.",
            "",
            describe(spec),
            *_callable(dependencies),
            "",
            "Current code:",
            f"```python\n{code.strip() or '# (none yet)'}\n```",
            "",
            "Failing tests:",
            *(f"- {_failure_lines(case, result)}" for case, result in shown),
            "",
            *_code_rules(),
            "Reply with the complete corrected function in one ```python code block.",
        ]
    )


def describe(spec: FunctionSpec) -> str:
    lines = [f"Function: {spec.signature()}", f"Purpose: {spec.purpose or '(not given)'}"]
    if spec.inputs:
        lines.append("Inputs:")
        lines += [f"- {p.name} ({p.type}): {p.description}".rstrip(": ") for p in spec.inputs]
    lines.append(f"Returns: {spec.outputs or '(not given)'}")
    if spec.complexity:
        lines.append(f"Complexity: {spec.complexity}")
    return "\n".join(lines)


def _callable(dependencies: Sequence[FunctionSpec]) -> list[str]:
    if not dependencies:
        return []
    return [
        "",
        "It may call these functions, which exist and are tested separately "
        "(call them, do not redefine them):",
        *(f"- {dependency.signature()}: {dependency.purpose}" for dependency in dependencies),
    ]


def _code_rules() -> list[str]:
    return [
        "Rules:",
        f"- Import what you use, from these packages only: {_PACKAGES}.",
        "- No printing, no files, no network; raise the exception an error test names.",
    ]


def _case_line(case: TestCase) -> str:
    outcome = f"raises {case.expect_error}" if case.expect_error else _json(case.expected)
    return f"{case.description}: {_json(case.inputs)} -> {outcome}"


def _failure_lines(case: TestCase, result: TestResult) -> str:
    lines = [_case_line(case)]
    if result.actual is not None and not case.expect_error:
        lines.append(f"  returned: {_json(result.actual)}")
    if result.error:
        lines.append(f"  error: {result.error}")
    if result.output:
        lines.append(f"  printed: {result.output.strip()}")
    return "\n".join(lines)


def _feedback(feedback: str | None) -> list[str]:
    if not feedback:
        return []
    return ["", f"Your previous reply could not be used: {feedback}. Reply again, in the format."]


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
