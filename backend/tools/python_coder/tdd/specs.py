"""Checking the planned functions and ordering them by their dependencies."""

from __future__ import annotations

import keyword
from collections.abc import Sequence

from backend.tools.python_coder.tdd.models import FunctionSpec

MAX_FUNCTIONS = 8


class SpecError(ValueError):
    """The planned functions cannot be built as they are."""


class DependencyCycle(SpecError):
    """Some functions depend on each other in a circle."""

    def __init__(self, cycle: list[str]) -> None:
        self.cycle = cycle
        super().__init__(f"the functions depend on each other in a cycle: {' -> '.join(cycle)}")


def normalize_specs(specs: Sequence[FunctionSpec]) -> list[FunctionSpec]:
    """Specs with valid, unique names and only known dependencies; raises `SpecError`.

    A dependency that names no planned function (a library call, the function
    itself for recursion) is dropped: only planned functions need ordering.
    """
    if not specs:
        raise SpecError("no functions were planned")
    if len(specs) > MAX_FUNCTIONS:
        raise SpecError(f"{len(specs)} functions were planned; plan at most {MAX_FUNCTIONS}")
    names = [spec.name for spec in specs]
    for name in names:
        if not name.isidentifier() or keyword.iskeyword(name):
            raise SpecError(f"{name!r} is not a valid Python function name")
        if name.startswith("_"):
            raise SpecError(f"{name!r}: function names must not start with an underscore")
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise SpecError(f"these functions are planned twice: {', '.join(duplicates)}")
    known = set(names)
    for spec in specs:
        for parameter in spec.inputs:
            if not parameter.name.isidentifier() or keyword.iskeyword(parameter.name):
                raise SpecError(f"{spec.name}: {parameter.name!r} is not a valid parameter name")
    return [
        spec.model_copy(
            update={
                "dependencies": list(
                    dict.fromkeys(d for d in spec.dependencies if d in known and d != spec.name)
                )
            }
        )
        for spec in specs
    ]


def toposort(specs: Sequence[FunctionSpec]) -> list[str]:
    """Function names, each after those it depends on; stable; raises `DependencyCycle`.

    Dependencies on unknown names, and a function's on itself (recursion), are ignored.
    """
    known = {spec.name for spec in specs}
    depends = {
        spec.name: [d for d in spec.dependencies if d in known and d != spec.name] for spec in specs
    }
    order: list[str] = []
    done: set[str] = set()
    visiting: list[str] = []

    def visit(name: str) -> None:
        if name in done:
            return
        if name in visiting:
            raise DependencyCycle([*visiting[visiting.index(name) :], name])
        visiting.append(name)
        for dependency in depends[name]:
            visit(dependency)
        visiting.pop()
        done.add(name)
        order.append(name)

    for spec in specs:
        visit(spec.name)
    return order


def transitive_dependencies(specs: Sequence[FunctionSpec], name: str) -> set[str]:
    """Every planned function `name` calls, directly or through others."""
    depends = {spec.name: spec.dependencies for spec in specs}
    found: set[str] = set()
    pending = list(depends.get(name, []))
    while pending:
        current = pending.pop()
        if current in found or current not in depends:
            continue
        found.add(current)
        pending.extend(depends[current])
    return found
