"""What a request asks of the model, under OpenAI's names; each backend maps it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GenerationOptions:
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    seed: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    # OpenAI's shape: {"type": "json_object"} or {"type": "json_schema", "json_schema": {...}}
    response_format: dict[str, Any] | None = None
    logprobs: bool = False
    top_logprobs: int | None = None

    @property
    def sampling(self) -> dict[str, Any]:
        """The sampling options that were given, under OpenAI's names."""
        given = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
            "stop": self.stop,
            "seed": self.seed,
            "frequency_penalty": self.frequency_penalty,
            "presence_penalty": self.presence_penalty,
        }
        return {key: value for key, value in given.items() if value is not None}

    @property
    def json_schema(self) -> dict[str, Any] | None:
        """The schema a response format asks for (any JSON object for `json_object`)."""
        if self.response_format is None:
            return None
        spec = self.response_format.get("json_schema") or {}
        return dict(spec.get("schema") or {"type": "object"})

    @property
    def logprob_kwargs(self) -> dict[str, Any]:
        """`logprobs` and `top_logprobs` when asked for, under OpenAI's names (which
        Ollama and llama.cpp share)."""
        if not self.logprobs:
            return {}
        if self.top_logprobs:
            return {"logprobs": True, "top_logprobs": self.top_logprobs}
        return {"logprobs": True}
