"""The TDD mode: specs, order, tests, implementations, sandbox runs, fixes.

`solve_tdd` never raises for a bad reply, a failing backend or a broken
sandbox (only cancellation passes through): it returns the solution as far as
it got, with `error` saying what stopped it. Improvement rounds fix bottom-up:
a failing function is sent back only when everything it calls passes, since
its failures may be its dependency's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from backend.llm import LLMError
from backend.llm.turn import TurnLLM
from backend.tools.python_coder.tdd import drafting
from backend.tools.python_coder.tdd.cache import cache_key, load_solution, save_solution
from backend.tools.python_coder.tdd.code_extract import Implementation
from backend.tools.python_coder.tdd.models import FunctionSpec, TDDSolution, TestResult
from backend.tools.python_coder.tdd.runner import run_tests
from backend.tools.python_coder.tdd.specs import toposort, transitive_dependencies
from backend.tools.sandbox.executor import BasePythonExecutor

logger = logging.getLogger(__name__)


async def solve_tdd(
    instruction: str,
    llm: TurnLLM,
    executor: BasePythonExecutor,
    cache_dir: Path,
    *,
    max_iterations: int = 3,
    settings_key: dict[str, Any] | None = None,
    run_timeout: float | None = None,
) -> TDDSolution:
    """Solve `instruction` test-first; a verified solution is cached under `cache_dir`."""
    key = cache_key(instruction, llm.model_name, settings_key or {})
    cached = await asyncio.to_thread(load_solution, cache_dir, key)
    if cached is not None:
        return cached.model_copy(update={"cached": True, "llm_calls": 0})
    solution = TDDSolution(instruction=instruction)
    calls_before = llm.usage.calls
    try:
        await _develop(solution, llm, executor, max_iterations, run_timeout)
    except (drafting.StepFailed, LLMError) as exc:
        solution.error = str(exc)
    except Exception as exc:
        logger.exception("The TDD run failed")
        solution.error = f"The TDD run failed: {type(exc).__name__}: {exc}"
    solution.llm_calls = llm.usage.calls - calls_before
    if solution.all_tests_passed and solution.error is None:
        try:
            await asyncio.to_thread(save_solution, cache_dir, key, solution)
        except OSError as exc:
            logger.warning("Could not cache the TDD solution: %s", exc)
    return solution


async def _develop(
    solution: TDDSolution,
    llm: TurnLLM,
    executor: BasePythonExecutor,
    max_iterations: int,
    run_timeout: float | None,
) -> None:
    """Fill in `solution` step by step, so that a failure keeps what was done."""
    specs = await drafting.plan_functions(llm, solution.instruction)
    solution.function_specs = specs
    solution.order = toposort(specs)
    ordered = sorted(specs, key=lambda spec: solution.order.index(spec.name))
    for spec in ordered:
        solution.tests += await drafting.write_tests(llm, spec, specs)
    implementations: dict[str, Implementation] = {}
    for spec in ordered:
        tests = [case for case in solution.tests if case.function == spec.name]
        implementations[spec.name] = await drafting.implement(llm, spec, specs, tests)
        solution.implementations[spec.name] = implementations[spec.name].code

    async def run() -> list[TestResult]:
        results = await run_tests(
            executor, implementations, solution.order, solution.tests, run_timeout=run_timeout
        )
        solution.test_results = results
        solution.all_tests_passed = bool(results) and all(r.passed for r in results)
        return results

    results = await run()
    while not solution.all_tests_passed and solution.iterations < max_iterations:
        solution.iterations += 1
        for name in functions_to_fix(specs, solution.order, results):
            spec = next(spec for spec in specs if spec.name == name)
            failures = [
                (case, result)
                for case, result in zip(solution.tests, results, strict=True)
                if case.function == name and result.ran and not result.passed
            ]
            implementations[name] = await drafting.fix(
                llm, spec, specs, implementations[name], failures
            )
            solution.implementations[name] = implementations[name].code
        results = await run()


def functions_to_fix(
    specs: Sequence[FunctionSpec], order: Sequence[str], results: Sequence[TestResult]
) -> list[str]:
    """Failing functions, in order, whose own dependencies all pass."""
    failing = {result.function for result in results if result.ran and not result.passed}
    return [
        name
        for name in order
        if name in failing and not transitive_dependencies(specs, name) & failing
    ]
