"""Error bodies, as `backend/api/errors.py` writes them, for the OpenAPI schema."""

from __future__ import annotations

from pydantic import BaseModel


class ErrorBody(BaseModel):
    detail: str
    code: str | None = None  # left out when the error has none


class OpenAIError(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class OpenAIErrorBody(BaseModel):
    """`/v1/*` errors, in OpenAI's shape."""

    error: OpenAIError
