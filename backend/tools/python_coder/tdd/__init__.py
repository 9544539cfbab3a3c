"""The python_coder's TDD mode: plan functions, test them first, implement, run, fix."""

from backend.tools.python_coder.tdd.models import (
    FunctionSpec,
    Parameter,
    TDDSolution,
    TestCase,
    TestResult,
)
from backend.tools.python_coder.tdd.solver import solve_tdd
from backend.tools.python_coder.tdd.specs import DependencyCycle, SpecError, toposort

__all__ = [
    "DependencyCycle",
    "FunctionSpec",
    "Parameter",
    "SpecError",
    "TDDSolution",
    "TestCase",
    "TestResult",
    "solve_tdd",
    "toposort",
]
