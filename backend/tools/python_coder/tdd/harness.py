"""The test program that runs in the sandbox, and reading its results back.

One program holds everything: the comparison code (`compare.py`'s source), the
implementations in dependency order, the tests as a JSON string literal, and
a loop that runs each test and prints one marker line per result. Each layer
is a nested function, so nothing lands in the session's namespace and a
function named like a session variable shadows nothing. The program ends by
raising, so the sandbox rolls the run back and the session's variables stay
exactly as they were.

The server only ever `json.loads` what comes back. The markers carry a random
nonce, so code under test cannot forge a result by accident.
"""

from __future__ import annotations

import ast
import json
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from backend.tools.python_coder.tdd.code_extract import top_level_definitions
from backend.tools.python_coder.tdd.models import TestCase, TestResult
from backend.tools.sandbox.executor import ExecutionResult

COMPARE_FILE = Path(__file__).with_name("compare.py")

_CELL_LINE = re.compile(r'File "<cell>", line (\d+)')
_ERROR_CHARS = 1500
_OUTPUT_CHARS = 500

_CHECK = """
    def describe(exc):
        try:
            return (type(exc).__name__ + ": " + str(exc))[:1000]
        except BaseException:
            return type(exc).__name__

    def check(function, case):
        outcome = {"passed": False, "actual": None, "error": None, "output": ""}
        wanted = case.get("expect_error")
        try:
            inputs = decode_value(case.get("inputs") or {})
            expected = decode_value(case.get("expected"))
        except Exception as exc:
            outcome["error"] = "the test itself is malformed: " + describe(exc)
            return outcome
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(printed):
                actual = function(**inputs)
        except BaseException as exc:
            raised = [kind.__name__ for kind in type(exc).mro()]
            if wanted and wanted in raised:
                outcome["passed"] = True
                outcome["actual"] = {"$raised": describe(exc)}
            elif wanted:
                outcome["error"] = "expected " + wanted + " to be raised, got " + describe(exc)
            else:
                outcome["error"] = describe(exc)
        else:
            outcome["actual"] = report_value(actual)
            if wanted:
                outcome["error"] = "expected " + wanted + " to be raised, but it returned a value"
            elif values_equal(actual, expected):
                outcome["passed"] = True
            else:
                outcome["error"] = "the result differs from the expected value"
        outcome["output"] = printed.getvalue()[:OUTPUT_CHARS]
        return outcome
"""


@dataclass(frozen=True)
class Program:
    code: str
    nonce: str
    spans: Mapping[str, tuple[int, int]]
    """Each implementation's first and last line in `code`."""

    @property
    def start_marker(self) -> str:
        return f"__TDD_START_{self.nonce}__"

    @property
    def result_marker(self) -> str:
        return f"__TDD_RESULT_{self.nonce}__"

    @property
    def done_marker(self) -> str:
        return f"__TDD_DONE_{self.nonce}__"

    def function_at(self, line: int) -> str | None:
        return next((n for n, (a, b) in self.spans.items() if a <= line <= b), None)


def build_program(
    implementations: Mapping[str, str],
    order: Sequence[str],
    cases: Sequence[TestCase],
    nonce: str | None = None,
) -> Program:
    """The program that defines `order`'s functions and runs `cases` against them."""
    nonce = nonce or secrets.token_hex(8)
    markers = Program("", nonce, {})
    lines = [
        f"def _tdd_run_{nonce}():",
        "    import contextlib",
        "    import io",
        "    import json",
        "",
        f"    OUTPUT_CHARS = {_OUTPUT_CHARS}",
        "",
        "    def load_compare():",
        *indent_code(compare_source(), " " * 8).splitlines(),
        "        return decode_value, values_equal, report_value",
        "",
        "    decode_value, values_equal, report_value = load_compare()",
        *_CHECK.splitlines(),
        "",
        "    def load_functions():",
    ]
    spans: dict[str, tuple[int, int]] = {}
    for name in order:
        block = indent_code(implementations[name], " " * 8).splitlines()
        spans[name] = (len(lines) + 1, len(lines) + len(block))
        lines += [*block, ""]
    table = ", ".join(f"{name!r}: {name}" for name in order)
    cases_json = json.dumps([case.model_dump() for case in cases])
    lines += [
        f"        return {{{table}}}",
        "",
        f"    cases = json.loads({cases_json!r})",
        "    functions = load_functions()",
        "    for index, case in enumerate(cases):",
        f"        print({markers.start_marker!r}, index, flush=True)",
        '        result = check(functions[case["function"]], case)',
        "        result['index'] = index",
        f"        print({markers.result_marker!r}, json.dumps(result), flush=True)",
        f"    print({markers.done_marker!r}, flush=True)",
        "",
        "",
        f"_tdd_run_{nonce}()",
        'raise SystemExit("the TDD run is over; rolled back to keep the session unchanged")',
        "",
    ]
    return Program("\n".join(lines), nonce, spans)


def fits_in_function(code: str) -> bool:
    """Whether `code` still parses once nested in the program (it may mix tabs in)."""
    try:
        ast.parse("def _wrapper():\n" + indent_code(code, "    ") + "\n    pass\n")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def indent_code(code: str, prefix: str) -> str:
    """`code` indented by `prefix`, except the lines inside multi-line strings."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    inside: set[int] = set()
    for node in ast.walk(tree) if tree is not None else ():
        is_text = isinstance(node, ast.Constant) and isinstance(node.value, str | bytes)
        if isinstance(node, ast.expr) and (is_text or isinstance(node, ast.JoinedStr)):
            inside.update(range(node.lineno + 1, (node.end_lineno or node.lineno) + 1))
    return "\n".join(
        line if number in inside or not line.strip() else prefix + line
        for number, line in enumerate(code.splitlines(), 1)
    )


@cache
def compare_source() -> str:
    # Its text, not the module: the comparison runs in the sandbox, and importing it here
    # would load pandas into the server for nothing.
    return top_level_definitions(COMPARE_FILE.read_text(encoding="utf-8"))


def read_results(
    program: Program, cases: Sequence[TestCase], execution: ExecutionResult
) -> list[TestResult]:
    """One result per case, from the program's marker lines (never trusting anything else)."""
    started: set[int] = set()
    reported: dict[int, dict[str, Any]] = {}
    finished = False
    for line in execution.stdout.splitlines():
        head, _, rest = line.partition(" ")
        if head == program.start_marker and rest.strip().isdigit():
            started.add(int(rest))
        elif head == program.result_marker:
            payload = _json_object(rest)
            if payload is not None and isinstance(payload.get("index"), int):
                reported[payload["index"]] = payload
        elif head == program.done_marker:
            finished = True
    failure = _shorten(execution.error or "the run stopped without reporting a result")
    blamed = None if started or finished else _blamed_function(program, execution.error)
    results: list[TestResult] = []
    for index, case in enumerate(cases):
        if index in reported:
            results.append(_reported(case, reported[index]))
        elif index in started or (not started and blamed in (None, case.function)):
            error = failure if blamed is None else f"defining `{blamed}` failed: {failure}"
            results.append(_failed(case, error))
        else:
            stopper = "an earlier test" if started else f"defining `{blamed}`"
            results.append(_failed(case, f"not run: {stopper} stopped the run", ran=False))
    return results


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _blamed_function(program: Program, error: str | None) -> str | None:
    for line in reversed(_CELL_LINE.findall(error or "")):
        name = program.function_at(int(line))
        if name is not None:
            return name
    return None


def _reported(case: TestCase, payload: dict[str, Any]) -> TestResult:
    error = payload.get("error")
    output = payload.get("output")
    return TestResult(
        function=case.function,
        description=case.description,
        passed=payload.get("passed") is True,
        actual=payload.get("actual"),
        error=_shorten(error) if isinstance(error, str) else None,
        output=output[:_OUTPUT_CHARS] if isinstance(output, str) else "",
    )


def _failed(case: TestCase, error: str, *, ran: bool = True) -> TestResult:
    return TestResult(
        function=case.function, description=case.description, passed=False, ran=ran, error=error
    )


def _shorten(text: str) -> str:
    return text if len(text) <= _ERROR_CHARS else text[: _ERROR_CHARS - 3] + "..."
