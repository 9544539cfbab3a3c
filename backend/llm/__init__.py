"""LLM clients. Only `backends` constructs chat models; callers see `BaseChatModel`."""

from backend.llm.backends import LLMBackend
from backend.llm.errors import LLMError
from backend.llm.options import GenerationOptions
from backend.llm.selection import create_llm_backend

__all__ = ["GenerationOptions", "LLMBackend", "LLMError", "create_llm_backend"]
