"""Running the tests against the current implementations, in the sandbox.

Implementations that cannot run (no code, or code the pre-filter rejects) are
not sent: their tests fail with the reason, and a stub stands in for them, so
the functions that call them fail with a message that names the culprit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from backend.tools.python_coder.tdd.code_extract import Implementation
from backend.tools.python_coder.tdd.harness import (
    build_program,
    fits_in_function,
    read_results,
)
from backend.tools.python_coder.tdd.models import TestCase, TestResult
from backend.tools.sandbox.ast_check import check_code
from backend.tools.sandbox.executor import BasePythonExecutor


def problems_of(implementation: Implementation) -> list[str]:
    """Why `implementation` may not run; empty if it may."""
    if implementation.problems:
        return implementation.problems
    problems = check_code(implementation.code)
    if not problems and not fits_in_function(implementation.code):
        problems = ["the code mixes tabs and spaces; indent with spaces only"]
    return problems


def stub(name: str) -> str:
    return (
        f"def {name}(*args, **kwargs):\n"
        f"    raise NotImplementedError({name!r} + ' could not run; see its own tests')\n"
    )


async def run_tests(
    executor: BasePythonExecutor,
    implementations: Mapping[str, Implementation],
    order: Sequence[str],
    cases: Sequence[TestCase],
    *,
    run_timeout: float | None = None,
) -> list[TestResult]:
    """One result per case, in the order of `cases`."""
    rejected: dict[str, list[str]] = {}
    runnable: dict[str, str] = {}
    for name in order:
        implementation = implementations.get(name) or Implementation(
            problems=["no implementation was written"]
        )
        problems = problems_of(implementation)
        if problems:
            rejected[name] = problems
        runnable[name] = stub(name) if problems else implementation.code
    to_run = [case for case in cases if case.function not in rejected]
    ran: list[TestResult] = []
    if to_run:
        program = build_program(runnable, order, to_run)
        ran = read_results(program, to_run, await executor.run(program.code, run_timeout))
    results = iter(ran)
    return [
        TestResult(
            function=case.function,
            description=case.description,
            passed=False,
            error="the code was not run: " + "; ".join(rejected[case.function]),
        )
        if case.function in rejected
        else next(results)
        for case in cases
    ]
