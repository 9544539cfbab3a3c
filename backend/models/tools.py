"""Tool calls over HTTP, answered in the seeds' ToolResponse shape."""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, Field, field_validator, model_validator

from backend.files import validate_file_paths
from backend.models.common import SessionId, Text
from backend.tools.python_coder.result import CoderResult
from backend.tools.python_coder.tdd import TDDSolution

CoderMode = Literal["generate", "code", "tdd"]


class PythonCoderRequest(BaseModel):
    """`code` runs as given; `query` is answered by generated code (or by TDD)."""

    session_id: SessionId
    query: Text | None = Field(default=None, max_length=20_000)
    code: Text | None = Field(default=None, min_length=1, max_length=200_000)
    mode: CoderMode | None = None
    files: list[str] | None = Field(default=None, max_length=100)
    file_paths: dict[str, str] | None = Field(default=None, max_length=100)
    model: str = Field(default="", max_length=200)
    timeout: float | None = Field(default=None, gt=0, le=3600)

    @field_validator("file_paths")
    @classmethod
    def _variables_are_names(cls, mapping: dict[str, str] | None) -> dict[str, str] | None:
        return None if mapping is None else validate_file_paths(mapping)

    @model_validator(mode="after")
    def _one_input(self) -> Self:
        if self.code is not None and self.query is not None:
            raise ValueError("send either `code` or `query`, not both")
        if self.mode is None:
            self.mode = "code" if self.code is not None else "generate"
        if self.mode == "code" and self.code is None:
            raise ValueError("mode 'code' needs `code`")
        if self.mode != "code" and not (self.query or "").strip():
            raise ValueError(f"mode '{self.mode}' needs a non-empty `query`")
        return self


class ToolData(BaseModel):
    stdout: str
    stderr: str
    files: list[str]
    workspace: str
    returncode: int


class ToolMetadata(BaseModel):
    execution_time: float
    code_execution_time: float
    variables: list[dict[str, Any]] = []
    truncated: bool = False


class ToolResponse(BaseModel):
    success: bool
    answer: str
    data: ToolData
    metadata: ToolMetadata
    error: str | None = None


class UploadedFile(BaseModel):
    """The stored file, with the same metadata as `GET /api/files/info`."""

    name: str
    path: str
    size: int
    extension: str
    session_id: str
    kind: str
    summary: str
    details: dict[str, Any]
    error: str | None = None


class WorkspaceFilePublic(BaseModel):
    path: str
    size: int
    modified: float


class CoderResponse(CoderResult):
    """A generated answer with the whole audit trail (`mode: generate`)."""

    mode: Literal["generate"] = "generate"
    session_id: str
    workspace: str


class FileInfoPublic(BaseModel):
    """seed 002's `get_file_info`: what the coder knows about one file."""

    name: str
    extension: str
    size: int
    kind: str
    summary: str
    details: dict[str, Any]
    error: str | None = None


class TDDResponse(TDDSolution):
    """seed 004's solution structure (`mode: tdd`)."""

    mode: Literal["tdd"] = "tdd"
    success: bool
    answer: str

    @classmethod
    def from_solution(cls, solution: TDDSolution) -> TDDResponse:
        passed = sum(result.passed for result in solution.test_results)
        if solution.error:
            answer = f"TDD failed: {solution.error}"
        else:
            answer = (
                f"{passed} of {len(solution.test_results)} tests pass for "
                f"{', '.join(solution.order) or 'no functions'}"
                + (" (cached)" if solution.cached else "")
                + f".\n\n```python\n{solution.code}\n```"
            )
        return cls(**solution.model_dump(), success=solution.all_tests_passed, answer=answer)


class ExtractRequest(BaseModel):
    session_id: SessionId
    name: str = Field(min_length=1, max_length=1000)


class ExtractedArchive(BaseModel):
    folder: str
    files: list[str]
