"""Asking the model for each TDD artefact: specs, tests, implementations, fixes.

Structured replies (specs, tests) get one retry that tells the model what was
wrong with its first reply; a second bad reply fails the step. Code replies
are never retried here: a reply without usable code becomes an implementation
with problems, which the improvement loop sends back like any failing test.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from backend.llm.turn import StructuredReplyError, TurnLLM
from backend.tools.python_coder.tdd import prompts
from backend.tools.python_coder.tdd.code_extract import Implementation, extract_function
from backend.tools.python_coder.tdd.models import (
    FunctionSpec,
    SpecList,
    TestCase,
    TestResult,
    TestSuite,
)
from backend.tools.python_coder.tdd.specs import SpecError, normalize_specs, toposort

logger = logging.getLogger(__name__)


class StepFailed(Exception):
    """A step got no usable reply, even after a retry."""


async def plan_functions(llm: TurnLLM, instruction: str) -> list[FunctionSpec]:
    """Checked specs whose dependencies form no cycle."""
    feedback: str | None = None
    for _attempt in range(2):
        prompt = prompts.specs_prompt(instruction, feedback)
        try:
            reply = await llm.json("tdd_specs", prompts.SYSTEM, prompt, SpecList)
            specs = normalize_specs(reply.functions)
            toposort(specs)
            return specs
        except (StructuredReplyError, SpecError) as exc:
            feedback = str(exc)
            logger.info("Unusable TDD specs reply: %s", feedback)
    raise StepFailed(f"The model did not plan usable functions: {feedback}.")


async def write_tests(
    llm: TurnLLM, spec: FunctionSpec, specs: Sequence[FunctionSpec]
) -> list[TestCase]:
    """Up to `MAX_TESTS` tests for `spec`, each calling it with its own parameter names."""
    feedback: str | None = None
    for _attempt in range(2):
        prompt = prompts.tests_prompt(spec, _dependencies(spec, specs), feedback)
        try:
            suite = await llm.json("tdd_tests", prompts.SYSTEM, prompt, TestSuite)
        except StructuredReplyError as exc:
            feedback = str(exc)
            continue
        allowed = set(spec.parameter_names)
        usable = [t for t in suite.tests if not allowed or set(t.inputs) <= allowed]
        if usable:
            return [
                TestCase(function=spec.name, **test.model_dump())
                for test in usable[: prompts.MAX_TESTS]
            ]
        feedback = (
            f"no test calls `{spec.name}` with its parameters ({', '.join(sorted(allowed))})"
            if suite.tests
            else "the reply holds no usable tests"
        )
    raise StepFailed(f"The model did not write usable tests for `{spec.name}`: {feedback}.")


async def implement(
    llm: TurnLLM, spec: FunctionSpec, specs: Sequence[FunctionSpec], tests: Sequence[TestCase]
) -> Implementation:
    prompt = prompts.implement_prompt(spec, _dependencies(spec, specs), tests)
    reply = await llm.text("tdd_implement", prompts.SYSTEM, prompt)
    return extract_function(reply, spec.name, [other.name for other in specs])


async def fix(
    llm: TurnLLM,
    spec: FunctionSpec,
    specs: Sequence[FunctionSpec],
    current: Implementation,
    failures: Sequence[tuple[TestCase, TestResult]],
) -> Implementation:
    """The model's corrected code, or `current` if its reply holds no usable function."""
    prompt = prompts.fix_prompt(spec, _dependencies(spec, specs), current.code, failures)
    reply = await llm.text("tdd_fix", prompts.SYSTEM, prompt)
    fixed = extract_function(reply, spec.name, [other.name for other in specs])
    if fixed.problems and current.code:
        logger.info("The fix for %s held no usable code: %s", spec.name, fixed.problems)
        return current
    return fixed


def _dependencies(spec: FunctionSpec, specs: Sequence[FunctionSpec]) -> list[FunctionSpec]:
    return [other for other in specs if other.name in spec.dependencies]
