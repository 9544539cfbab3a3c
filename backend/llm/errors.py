"""The one error type LLM failures become, carrying the fix for the user."""

from __future__ import annotations


class LLMError(Exception):
    """An LLM call failed; `message` says what happened and how to fix it."""

    def __init__(self, message: str, *, status_code: int = 503, code: str = "llm_unavailable"):
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.code = code
