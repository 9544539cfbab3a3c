"""The TDD mode's data: function specs, test cases, results and the solution.

Everything here is plain JSON, so a solution can be cached, logged and sent to
the client as it is. Test values that JSON cannot hold are written as tagged
objects (`{"$dataframe": ...}`, `{"$float": "nan"}`); see `compare.py`.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

_PARAMETER_TEXT = re.compile(r"^\s*(\w+)\s*(?::\s*(.+?))?\s*$")


class Parameter(BaseModel):
    name: str
    type: str = "Any"
    description: str = ""


class FunctionSpec(BaseModel):
    name: str
    purpose: str = ""
    inputs: list[Parameter] = Field(default_factory=list)
    outputs: str = ""
    dependencies: list[str] = Field(default_factory=list)
    complexity: str = ""

    @field_validator("inputs", mode="before")
    @classmethod
    def _parameters_may_be_text(cls, inputs: Any) -> Any:
        """Small models often write `"text: str"` instead of an object."""
        if not isinstance(inputs, list):
            return inputs
        parsed: list[Any] = []
        for item in inputs:
            match = _PARAMETER_TEXT.match(item) if isinstance(item, str) else None
            parsed.append({"name": match[1], "type": match[2] or "Any"} if match else item)
        return parsed

    @field_validator("outputs", "complexity", mode="before")
    @classmethod
    def _text_of_anything(cls, value: Any) -> Any:
        return value if isinstance(value, str) or value is None else str(value)

    @property
    def parameter_names(self) -> list[str]:
        return [parameter.name for parameter in self.inputs]

    def signature(self) -> str:
        """`def name(a: int, b: str) -> outputs`, for prompts."""
        parameters = ", ".join(f"{p.name}: {p.type}" for p in self.inputs)
        return f"def {self.name}({parameters}) -> {self.outputs or 'Any'}"


class SpecList(BaseModel):
    """The reply to the specs prompt."""

    functions: list[FunctionSpec]


TestKind = Literal["normal", "edge", "error"]


class TestDraft(BaseModel):
    """One test as the model writes it, before it is tied to its function."""

    __test__: ClassVar[bool] = False  # not a pytest class

    description: str = ""
    kind: TestKind = "normal"
    inputs: dict[str, Any] = Field(default_factory=dict)
    expected: Any = None
    expect_error: str | None = None
    """The exception class name the call must raise (a subclass counts too)."""

    @field_validator("expect_error", mode="before")
    @classmethod
    def _bare_class_name(cls, value: Any) -> Any:
        """`"builtins.ValueError: bad input"` names `ValueError`."""
        if not isinstance(value, str):
            return value
        name = value.split(":")[0].strip().split(".")[-1]
        return name if name.isidentifier() else None


class TestSuite(BaseModel):
    """The reply to the tests prompt."""

    __test__: ClassVar[bool] = False

    tests: list[TestDraft]

    @field_validator("tests", mode="before")
    @classmethod
    def _drop_malformed_tests(cls, tests: Any) -> Any:
        """One malformed test should not cost the others."""
        if not isinstance(tests, list):
            return tests
        kept = []
        for test in tests:
            try:
                kept.append(TestDraft.model_validate(test))
            except ValidationError:
                continue
        return kept


class TestCase(TestDraft):
    __test__: ClassVar[bool] = False

    function: str


class TestResult(BaseModel):
    __test__: ClassVar[bool] = False

    function: str
    description: str
    passed: bool
    ran: bool = True
    """False when the run stopped (at another test or function) before this test began."""
    actual: Any = None
    """What the function returned, as JSON (or `{"$repr": ...}`)."""
    error: str | None = None
    output: str = ""
    """What the function printed, shortened."""


class TDDSolution(BaseModel):
    instruction: str
    function_specs: list[FunctionSpec] = Field(default_factory=list)
    order: list[str] = Field(default_factory=list)
    """The functions in dependency order: each after the ones it calls."""
    implementations: dict[str, str] = Field(default_factory=dict)
    tests: list[TestCase] = Field(default_factory=list)
    test_results: list[TestResult] = Field(default_factory=list)
    all_tests_passed: bool = False
    iterations: int = 0
    """Improvement rounds used (0: everything passed at the first run)."""
    cached: bool = False
    error: str | None = None
    llm_calls: int = 0
    """Calls this request made (0 for a cache hit)."""

    @property
    def code(self) -> str:
        """All implementations, in dependency order, as one program."""
        return "\n\n\n".join(
            self.implementations[name] for name in self.order if name in self.implementations
        )
