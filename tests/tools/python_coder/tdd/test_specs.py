"""Checking planned functions and ordering them by dependency."""

from __future__ import annotations

import pytest

from backend.tools.python_coder.tdd import DependencyCycle, FunctionSpec, SpecError, toposort
from backend.tools.python_coder.tdd.specs import normalize_specs, transitive_dependencies


def spec(name: str, *dependencies: str) -> FunctionSpec:
    return FunctionSpec(name=name, dependencies=list(dependencies))


def test_toposort_puts_dependencies_first_and_keeps_the_planned_order() -> None:
    specs = [spec("report", "mean", "load"), spec("mean", "load"), spec("load"), spec("other")]
    assert toposort(specs) == ["load", "mean", "report", "other"]


def test_toposort_names_the_cycle() -> None:
    specs = [spec("a", "b"), spec("b", "c"), spec("c", "a"), spec("d")]
    with pytest.raises(DependencyCycle, match="a -> b -> c -> a") as raised:
        toposort(specs)
    assert raised.value.cycle == ["a", "b", "c", "a"]


def test_recursion_and_unknown_names_are_not_dependencies() -> None:
    specs = normalize_specs([spec("fact", "fact", "math.prod"), spec("main", "fact", "fact")])
    assert [s.dependencies for s in specs] == [[], ["fact"]]
    assert toposort([spec("fact", "fact")]) == ["fact"]


@pytest.mark.parametrize(
    ("specs", "problem"),
    [
        ([], "no functions"),
        ([spec("a"), spec("a")], "planned twice: a"),
        ([spec("not valid")], "not a valid Python function name"),
        ([spec("class")], "not a valid Python function name"),
        ([spec("_private")], "underscore"),
        ([spec(f"f{i}") for i in range(9)], "at most 8"),
    ],
)
def test_unusable_plans_are_refused(specs: list[FunctionSpec], problem: str) -> None:
    with pytest.raises(SpecError, match=problem):
        normalize_specs(specs)


def test_inputs_written_as_text_are_understood() -> None:
    parsed = FunctionSpec.model_validate(
        {"name": "f", "inputs": ["text: str", "n", {"name": "k", "type": "int"}]}
    )
    assert [(p.name, p.type) for p in parsed.inputs] == [
        ("text", "str"),
        ("n", "Any"),
        ("k", "int"),
    ]
    assert parsed.signature() == "def f(text: str, n: Any, k: int) -> Any"


def test_transitive_dependencies() -> None:
    specs = [spec("a"), spec("b", "a"), spec("c", "b")]
    assert transitive_dependencies(specs, "c") == {"a", "b"}
    assert transitive_dependencies(specs, "a") == set()
