"""The backends whose model runs in the server's own process.

`EmbeddedBackend` is the offline demo model (llama.cpp, `embedded.py`);
`ScriptedBackend` replays a test's scripted replies (`scripted.py`). Neither has a
server to reach: their errors are a model's, never a connection's.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage

from backend.config import ConfigError, Settings
from backend.llm.backends import LLMBackend
from backend.llm.context import MESSAGE_OVERHEAD, Counter
from backend.llm.errors import LLMError
from backend.llm.options import GenerationOptions
from backend.llm.profile import CAPABLE, SMALL


class EmbeddedBackend(LLMBackend):
    name = "embedded"
    supports_logprobs = True  # read from the logits llama.cpp samples from
    profile = SMALL

    def __init__(self, settings: Settings, reason: str) -> None:
        from backend.llm.embedded import EmbeddedChatModel, shipped_model_path

        path = settings.EMBEDDED_MODEL_PATH or str(shipped_model_path())
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            raise ConfigError(f"EMBEDDED_MODEL_PATH: cannot read {path}: {exc.strerror}") from None
        self._model = EmbeddedChatModel(
            model_path=path,
            n_ctx=settings.EMBEDDED_CONTEXT_SIZE,
            n_threads=settings.EMBEDDED_THREADS,
            prompt_cache_mb=settings.EMBEDDED_PROMPT_CACHE_MB,
        )
        super().__init__(
            self._model.model_name, reason, settings.LLM_CONTEXT_WINDOW or self._model.n_ctx
        )
        self.max_tokens = settings.EMBEDDED_MAX_TOKENS
        self._model.load()

    @property
    def token_counter(self) -> tuple[Counter, bool]:
        """The model's own tokenizer: exact, in the server's process."""
        model = self._model

        def count(messages: list[BaseMessage]) -> int:
            return sum(model.count_tokens(str(m.text)) + MESSAGE_OVERHEAD for m in messages)

        return count, True

    def call_kwargs(self, options: GenerationOptions) -> dict[str, Any]:
        kwargs = super().call_kwargs(options)
        kwargs.setdefault("max_tokens", self.max_tokens)  # the request's own limit wins
        return kwargs

    def structured_kwargs(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        # Decoding follows a llama.cpp grammar built from the schema.
        return {"response_format": {"type": "json_object", "schema": schema}}

    async def list_models(self) -> list[str]:
        return [self.default_model]

    def chat_model(self, model: str) -> BaseChatModel:
        return self._model

    def explain(self, exc: Exception) -> LLMError:
        if isinstance(exc, ValueError) and "context window" in str(exc):
            return LLMError(
                "The conversation is too long for the embedded model's context window "
                "(EMBEDDED_CONTEXT_SIZE). Start a new session or shorten the input.",
                status_code=400,
                code="context_length_exceeded",
            )
        return super().explain(exc)


SCRIPTED_WINDOW = 131_072


class ScriptedBackend(LLMBackend):
    name = "scripted"
    profile = CAPABLE  # replays what the test scripted, so every course is reachable

    def __init__(self, settings: Settings, reason: str) -> None:
        from backend.llm.scripted import ScriptedChatModel

        if not settings.SCRIPTED_REPLIES:
            raise ConfigError("SCRIPTED_REPLIES: required when LLM_BACKEND=scripted")
        try:
            self._model = ScriptedChatModel.from_file(settings.SCRIPTED_REPLIES)
        except (OSError, ValueError) as exc:
            raise ConfigError(
                f"SCRIPTED_REPLIES: cannot load a JSON list of replies: {exc}"
            ) from None
        # A script's prompts are the test's: a large window unless the test sets one.
        super().__init__(
            self._model.model_name,
            reason,
            settings.LLM_CONTEXT_WINDOW or SCRIPTED_WINDOW,
            settings.MODEL_PROFILES,  # a test's stand-in for an operator's word; never probed
        )

    async def list_models(self) -> list[str]:
        return [self.default_model]

    def chat_model(self, model: str) -> BaseChatModel:
        return self._model

    def explain(self, exc: Exception) -> LLMError:
        from backend.llm.scripted import ScriptedFailure, ScriptExhausted

        if isinstance(exc, ScriptExhausted):
            return LLMError(f"The scripted model has no reply left: {exc}.")
        if isinstance(exc, ScriptedFailure):
            return LLMError(str(exc))
        return super().explain(exc)
