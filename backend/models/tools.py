"""Tool calls over HTTP, answered in the seeds' ToolResponse shape."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from backend.models.common import SessionId, Text


class PythonCoderRequest(BaseModel):
    session_id: SessionId
    code: Text = Field(min_length=1, max_length=200_000)
    timeout: float | None = Field(default=None, gt=0, le=3600)


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
    name: str
    path: str
    size: int
    extension: str
    session_id: str


class WorkspaceFilePublic(BaseModel):
    path: str
    size: int
    modified: float
