"""LLM clients. Only `backends` constructs chat models; callers see `BaseChatModel`."""

from backend.core.llm.backends import LLMBackend
from backend.core.llm.errors import LLMError
from backend.core.llm.options import GenerationOptions
from backend.core.llm.selection import create_llm_backend

__all__ = ["GenerationOptions", "LLMBackend", "LLMError", "create_llm_backend"]
