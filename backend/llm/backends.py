"""The one place that creates chat models.

Each backend knows its models, builds LangChain `BaseChatModel` objects, maps
request options to its own parameter names, and turns its library's exceptions
into an `LLMError` that tells the user how to fix things. The agents see a
`BaseChatModel`; plain chat sees a `ChatStream`, which on the `openai` and
`ollama` backends talks to the upstream directly (`upstream.py`). The backends
whose model runs in the server's own process are in `in_process.py`.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from functools import cache
from typing import Any

import httpx
from langchain_core.language_models import BaseChatModel

from backend.config import ConfigError, Settings
from backend.config.settings import ModelSetting
from backend.llm.chat_stream import ChatStream, langchain_stream
from backend.llm.context import Counter, estimate_messages
from backend.llm.errors import LLMError
from backend.llm.model_probe import ModelAbilities, from_setting, probe
from backend.llm.options import GenerationOptions
from backend.llm.profile import CAPABLE, CAPABLE_NATIVE_TOOLS, ModelProfile
from backend.llm.upstream import Upstream, UpstreamError, ollama_stream, openai_stream

_CONNECT_TIMEOUT = 2.0
# The window assumed when neither LLM_CONTEXT_WINDOW nor the server says (logged once).
FALLBACK_WINDOW = 8192


logger = logging.getLogger(__name__)


class LLMBackend(ABC):
    name: str
    supports_logprobs = False  # whether `logprobs` can be honoured
    profile: ModelProfile = CAPABLE  # what its model can be trusted to do
    # Whether its server may cut a prompt without an error (so its reported prompt size is
    # checked after each call); a model in our own process refuses one that is too long.
    may_cut_prompts = False

    def __init__(
        self,
        default_model: str,
        reason: str,
        context_window: int = 0,
        models: Mapping[str, ModelSetting] | None = None,
        probe: bool = False,
    ) -> None:
        """`models`: MODEL_PROFILES; `probe`: whether a model not named there is probed."""
        self.default_model = default_model
        self.reason = reason
        self.configured_window = context_window  # LLM_CONTEXT_WINDOW; 0: learn it
        self._windows: dict[str, int] = {}
        self.model_settings = dict(models or {})
        self.probes = probe
        self._abilities: dict[str, ModelAbilities] = {}
        self._probing: dict[str, asyncio.Lock] = {}

    async def abilities(self, model: str) -> ModelAbilities:
        """What `model` can do (`model_probe.py`): MODEL_PROFILES, else the probe at its
        first use (kept while the server runs; a probe that fails is tried again at the
        next use, meanwhile the backend's own profile holds), else the backend's profile."""
        known = self._abilities.get(model)
        if known is not None:
            return known
        async with self._probing.setdefault(model, asyncio.Lock()):
            known = self._abilities.get(model)
            if known is not None:
                return known
            window = await self.context_window(model)
            setting = self.model_settings.get(model)
            if setting is not None:
                known = from_setting(setting, self.profile.native_tools, window)
            elif not self.probes:
                known = ModelAbilities(self.profile, window, "backend")
            else:
                try:
                    known = await probe(self, model, window)
                except Exception as exc:
                    logger.warning("Model %r could not be probed: %s", model, self.explain(exc))
                    return ModelAbilities(self.profile, window, "backend")
            self._abilities[model] = known
            return known

    async def abilities_if_known(self, model: str) -> ModelAbilities | None:
        """`abilities(model)` where that asks the model nothing (its window aside), else
        None: a listing never probes."""
        if model in self._abilities or model in self.model_settings or not self.probes:
            return await self.abilities(model)
        return None

    async def context_window(self, model: str) -> int:
        """The model's context window in tokens: MODEL_PROFILES' or LLM_CONTEXT_WINDOW,
        else what its server says (asked once per model), else `FALLBACK_WINDOW`."""
        setting = self.model_settings.get(model)
        if setting is not None and setting.context_window:
            return setting.context_window
        if self.configured_window:
            return self.configured_window
        window = self._windows.get(model)
        if window is None:
            learned = await self._learn_window(model)
            if learned is None:
                logger.warning(
                    "The %s backend did not say model %r's context window; assuming %d "
                    "tokens (set LLM_CONTEXT_WINDOW).",
                    self.name,
                    model,
                    FALLBACK_WINDOW,
                )
            window = self._windows.setdefault(model, learned or FALLBACK_WINDOW)
        return window

    async def _learn_window(self, model: str) -> int | None:
        """The window the model's server reports, or None when it says nothing."""
        return None

    @property
    def token_counter(self) -> tuple[Counter, bool]:
        """How prompts are measured, and whether that is the model's own tokenizer."""
        return estimate_messages, False

    @abstractmethod
    async def list_models(self) -> list[str]: ...

    @abstractmethod
    def chat_model(self, model: str) -> BaseChatModel: ...

    def chat_stream(self, model: str) -> ChatStream:
        """Plain chat's model, as a stream of events."""
        return langchain_stream(self.chat_model(model))

    async def aclose(self) -> None:  # noqa: B027 (most backends hold no connections)
        """Release pooled connections."""

    def call_kwargs(self, options: GenerationOptions) -> dict[str, Any]:
        """Per-call keyword arguments for this backend's chat model."""
        return {**options.sampling, **self._format_kwargs(options), **options.logprob_kwargs}

    def _format_kwargs(self, options: GenerationOptions) -> dict[str, Any]:
        schema = options.json_schema
        return (self.structured_kwargs(schema) or {}) if schema is not None else {}

    def structured_kwargs(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        """Call arguments that constrain a reply to `schema`, or None if unsupported."""
        return None

    def cache_kwargs(self) -> dict[str, Any]:
        """Call arguments that ask the server to keep and reuse the prompt's cached prefix."""
        return {}

    def refuses_cache_hint(self, exc: Exception) -> bool:
        """Whether `exc` is the server refusing `cache_kwargs`; if so they are dropped from now
        on, and the call should be made again without them."""
        return False

    def tool_kwargs(self, tools: list[dict[str, Any]], choice: Any) -> dict[str, Any] | None:
        """Call arguments for native tool calling under `choice`, or None to prompt for calls."""
        return None

    async def resolve_model(self, requested: str) -> str:
        """Return the model to use, or raise `LLMError` (404) naming the fix."""
        models = await self.list_models()
        if requested in models:
            return requested
        raise LLMError(
            f"The model '{requested}' does not exist. Available: {', '.join(models) or 'none'}.",
            status_code=404,
            code="model_not_found",
        )

    def explain(self, exc: Exception) -> LLMError:
        if isinstance(exc, LLMError):
            return exc
        return LLMError(
            f"The {self.name} LLM backend failed: {type(exc).__name__}: {exc}", status_code=502
        )


# The connection broke after the request went out: mid-answer, or before any answer
# (after the retries `Upstream` makes).
_CUT = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
_CUT_OFF = "cut the connection before its answer was complete; try again."


def _rate_limited(status: int) -> dict[str, Any]:
    """An upstream's 429 (still there after our retries) reaches the client as one, so
    its SDK backs off too; any other upstream failure is a 502."""
    return {"status_code": 429, "code": "rate_limited"} if status == 429 else {"status_code": 502}


# What Ollama loads a model with when a request sends no `num_ctx` (more only on large GPUs).
OLLAMA_DEFAULT_NUM_CTX = 4096


class OllamaBackend(LLMBackend):
    name = "ollama"
    supports_logprobs = True  # Ollama answers them since 0.12.11; older ones leave them out
    profile = CAPABLE_NATIVE_TOOLS
    may_cut_prompts = True

    def __init__(self, settings: Settings, reason: str) -> None:
        super().__init__(
            settings.OLLAMA_MODEL,
            reason,
            settings.LLM_CONTEXT_WINDOW,
            settings.MODEL_PROFILES,
            probe=settings.MODEL_PROBE,
        )
        self.host = settings.OLLAMA_HOST
        # Sent with every call, always the same, so Ollama never reloads the model for it.
        self.num_ctx = settings.OLLAMA_NUM_CTX
        self.timeout = settings.LLM_REQUEST_TIMEOUT
        self.upstream = Upstream(self.host, httpx.Timeout(self.timeout, connect=_CONNECT_TIMEOUT))
        self.keep_alive = settings.OLLAMA_KEEP_ALIVE
        self._models: tuple[float, list[str]] = (0.0, [])

    async def list_models(self) -> list[str]:
        fetched_at, models = self._models
        if time.monotonic() - fetched_at < 5:
            return models
        try:
            async with httpx.AsyncClient(timeout=_CONNECT_TIMEOUT) as client:
                response = await client.get(f"{self.host}/api/tags")
                response.raise_for_status()
            models = [entry["name"] for entry in response.json()["models"]]
        except httpx.TimeoutException:
            raise LLMError(
                f"Ollama at {self.host} did not list its models within {_CONNECT_TIMEOUT:g} s.",
                status_code=504,
                code="llm_timeout",
            ) from None
        except httpx.HTTPError as exc:
            raise self.explain(exc) from None
        except (ValueError, KeyError, TypeError):
            raise LLMError(
                f"{self.host}/api/tags did not answer like Ollama; check OLLAMA_HOST.",
                status_code=502,
            ) from None
        self._models = (time.monotonic(), models)
        return models

    async def resolve_model(self, requested: str) -> str:
        models = await self.list_models()
        if not requested:  # no OLLAMA_MODEL and none in the request: the first pulled one
            if models:
                return models[0]
            raise LLMError(
                f"Ollama at {self.host} has no models. Run `ollama pull <model>` "
                "(for example `ollama pull qwen2.5-coder:7b`).",
                status_code=503,
                code="model_not_found",
            )
        for name in (requested, f"{requested}:latest"):
            if name in models:
                return name
        raise LLMError(
            f"The model '{requested}' is not available in Ollama at {self.host}. "
            f"Run `ollama pull {requested}` (pulled models: {', '.join(models) or 'none'}).",
            status_code=404,
            code="model_not_found",
        )

    async def _learn_window(self, model: str) -> int | None:
        """OLLAMA_NUM_CTX, or less when the model was trained on less (`/api/show`)."""
        trained = await self._trained_window(model)
        if self.num_ctx:
            return min(self.num_ctx, trained) if trained else self.num_ctx
        return min(trained, OLLAMA_DEFAULT_NUM_CTX) if trained else OLLAMA_DEFAULT_NUM_CTX

    async def _trained_window(self, model: str) -> int | None:
        try:
            async with httpx.AsyncClient(timeout=_CONNECT_TIMEOUT) as client:
                response = await client.post(f"{self.host}/api/show", json={"model": model})
                response.raise_for_status()
                info = response.json().get("model_info") or {}
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        lengths = [
            value
            for key, value in info.items()
            if key.endswith(".context_length") and isinstance(value, int) and value > 0
        ]
        return min(lengths) if lengths else None

    def chat_model(self, model: str) -> BaseChatModel:
        return _ollama_chat_model(self.host, model, self.timeout, self.num_ctx or None)

    def chat_stream(self, model: str) -> ChatStream:
        return ollama_stream(self.upstream, model)

    async def aclose(self) -> None:
        await self.upstream.aclose()

    def call_kwargs(self, options: GenerationOptions) -> dict[str, Any]:
        # Ollama takes either these options or the model's defaults, never a mix.
        ollama_options = options.sampling
        if "max_tokens" in ollama_options:
            ollama_options["num_predict"] = ollama_options.pop("max_tokens")
        if self.num_ctx:  # else Ollama loads the model with 4,096 tokens and cuts the rest
            ollama_options["num_ctx"] = self.num_ctx
        kwargs: dict[str, Any] = {"options": ollama_options} if ollama_options else {}
        return {**kwargs, **self._format_kwargs(options), **options.logprob_kwargs}

    def structured_kwargs(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        return {"format": schema}

    def cache_kwargs(self) -> dict[str, Any]:
        # Ollama reuses the loaded model's cached prefix while the model stays loaded.
        return {"keep_alive": self.keep_alive} if self.keep_alive else {}

    def tool_kwargs(self, tools: list[dict[str, Any]], choice: Any) -> dict[str, Any] | None:
        # Ollama's tools have no tool_choice: a required call goes through `format` instead.
        return {"tools": tools} if choice == "auto" else None

    def explain(self, exc: Exception) -> LLMError:
        from ollama import ResponseError

        if isinstance(exc, (ResponseError, UpstreamError)) and exc.status_code == 404:
            said = exc.error if isinstance(exc, ResponseError) else exc.message
            return LLMError(
                f"Ollama at {self.host} says: {said}. Run `ollama pull <model>` first.",
                status_code=404,
                code="model_not_found",
            )
        if isinstance(exc, UpstreamError):
            return LLMError(
                f"Ollama at {self.host} answered {exc.status_code}: {exc.message}",
                **_rate_limited(exc.status_code),
            )
        if isinstance(exc, _CUT):
            return LLMError(f"Ollama at {self.host} {_CUT_OFF}", status_code=502)
        if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, ConnectionError)):
            return LLMError(
                f"Ollama is not reachable at {self.host}. Start it with `ollama serve`, "
                "set OLLAMA_HOST, or set LLM_BACKEND=embedded to use the built-in model."
            )
        if isinstance(exc, httpx.TimeoutException):
            return LLMError(
                f"Ollama at {self.host} did not answer within {self.timeout:g} s "
                "(LLM_REQUEST_TIMEOUT).",
                status_code=504,
                code="llm_timeout",
            )
        return super().explain(exc)


class OpenAIBackend(LLMBackend):
    name = "openai"
    supports_logprobs = True  # passed through: the upstream answers them or says why not
    profile = CAPABLE_NATIVE_TOOLS
    may_cut_prompts = True

    def __init__(self, settings: Settings, reason: str) -> None:
        for variable in ("OPENAI_BASE_URL", "OPENAI_MODEL"):
            if not getattr(settings, variable):
                raise ConfigError(f"{variable}: required when LLM_BACKEND=openai")
        super().__init__(
            settings.OPENAI_MODEL,
            reason,
            settings.LLM_CONTEXT_WINDOW,
            settings.MODEL_PROFILES,
            probe=settings.MODEL_PROBE,
        )
        self.base_url = settings.OPENAI_BASE_URL
        self.api_key = settings.OPENAI_API_KEY or "unused"
        self.timeout = httpx.Timeout(settings.LLM_REQUEST_TIMEOUT, connect=_CONNECT_TIMEOUT)
        from langchain_openai import ChatOpenAI

        self._model = ChatOpenAI(
            model=settings.OPENAI_MODEL,
            base_url=settings.OPENAI_BASE_URL,
            # Local servers (vLLM, llama.cpp, LM Studio) accept any key.
            api_key=self.api_key,  # type: ignore[arg-type]
            timeout=self.timeout,
            max_retries=2,  # the SDK backs off on 429 (Retry-After), 5xx and refused connections
            stream_usage=True,
        )
        self.upstream = Upstream(
            self.base_url, self.timeout, {"Authorization": f"Bearer {self.api_key}"}
        )
        self.cache_prompt = settings.OPENAI_CACHE_PROMPT

    async def list_models(self) -> list[str]:
        return [self.default_model]

    async def _learn_window(self, model: str) -> int | None:
        """llama.cpp's `/props` (`n_ctx`), else vLLM's `/v1/models` (`max_model_len`)."""
        root = self.base_url.removesuffix("/v1")
        headers = {"Authorization": f"Bearer {self.api_key}"}
        async with httpx.AsyncClient(timeout=_CONNECT_TIMEOUT, headers=headers) as client:
            props = await _json_at(client, f"{root}/props")
            if isinstance(props, dict):
                settings = props.get("default_generation_settings") or {}
                for value in (props.get("n_ctx"), settings.get("n_ctx")):
                    if isinstance(value, int) and value > 0:
                        return value
            listed = await _json_at(client, f"{self.base_url}/models")
        entries = listed.get("data") if isinstance(listed, dict) else None
        for entry in entries or ():
            if isinstance(entry, dict) and entry.get("id") == model:
                length = entry.get("max_model_len")
                if isinstance(length, int) and length > 0:
                    return length
        return None

    def chat_model(self, model: str) -> BaseChatModel:
        return self._model

    def chat_stream(self, model: str) -> ChatStream:
        return openai_stream(self.upstream, model)

    async def aclose(self) -> None:
        await self.upstream.aclose()
        client = getattr(self._model, "root_async_client", None)  # the agents' calls
        if client is not None:
            await client.close()

    def tool_kwargs(self, tools: list[dict[str, Any]], choice: Any) -> dict[str, Any] | None:
        return {"tools": tools, "tool_choice": choice}

    def structured_kwargs(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        # llama.cpp, vLLM, LM Studio and Ollama's /v1 constrain decoding to the schema.
        return {"response_format": {"type": "json_schema", "json_schema": _named(schema)}}

    def cache_kwargs(self) -> dict[str, Any]:
        # llama.cpp server's switch; the request body carries it beside the OpenAI fields.
        return {"extra_body": {"cache_prompt": True}} if self.cache_prompt else {}

    def refuses_cache_hint(self, exc: Exception) -> bool:
        import openai

        if not (self.cache_prompt and isinstance(exc, openai.BadRequestError)):
            return False
        if "cache_prompt" not in str(exc):
            return False
        # An upstream that refuses unknown fields (OpenAI's own API): work on without the hint.
        self.cache_prompt = False
        logger.warning(
            "The upstream at %s refuses `cache_prompt`; no longer sending it "
            "(set OPENAI_CACHE_PROMPT=false to skip this first refusal).",
            self.base_url,
        )
        return True

    def call_kwargs(self, options: GenerationOptions) -> dict[str, Any]:
        # The upstream speaks OpenAI: the response format goes through as the client sent it.
        kwargs = {**options.sampling, **options.logprob_kwargs}
        if options.response_format is not None:
            kwargs["response_format"] = options.response_format
        return kwargs

    def explain(self, exc: Exception) -> LLMError:
        import openai

        if isinstance(exc, UpstreamError) and exc.status_code in (401, 403):
            return LLMError(
                f"The upstream at {self.base_url} rejected OPENAI_API_KEY.", status_code=502
            )
        if isinstance(exc, UpstreamError):
            return LLMError(
                f"The upstream at {self.base_url} answered {exc.status_code}: {exc.message}",
                **_rate_limited(exc.status_code),
            )
        if isinstance(exc, (openai.APITimeoutError, httpx.TimeoutException)):
            return LLMError(
                f"The upstream at {self.base_url} timed out.", status_code=504, code="llm_timeout"
            )
        if isinstance(exc, _CUT):
            return LLMError(f"The upstream at {self.base_url} {_CUT_OFF}", status_code=502)
        if isinstance(exc, (openai.APIConnectionError, httpx.TransportError)):
            return LLMError(
                f"The upstream OpenAI-compatible server at {self.base_url} is not reachable. "
                "Check OPENAI_BASE_URL and that the server is running."
            )
        if isinstance(exc, openai.AuthenticationError):
            return LLMError(
                f"The upstream at {self.base_url} rejected OPENAI_API_KEY.", status_code=502
            )
        if isinstance(exc, openai.APIStatusError):
            return LLMError(
                f"The upstream at {self.base_url} answered {exc.status_code}: {exc.message}",
                status_code=502,
            )
        return super().explain(exc)


async def _json_at(client: httpx.AsyncClient, url: str) -> Any:
    """The JSON at `url`, or None when there is none (a server without that route)."""
    try:
        response = await client.get(url)
        response.raise_for_status()
        return response.json()
    except (httpx.HTTPError, ValueError):
        return None


def _named(schema: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's `json_schema` object: a name (letters, digits, _ and -) and the schema."""
    title = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or "reply"))[:64]
    return {"name": title or "reply", "schema": schema}


@cache
def _ollama_chat_model(host: str, model: str, timeout: float, num_ctx: int | None) -> BaseChatModel:
    from langchain_ollama import ChatOllama

    return ChatOllama(
        model=model,
        base_url=host,
        num_ctx=num_ctx,
        client_kwargs={"timeout": httpx.Timeout(timeout, connect=_CONNECT_TIMEOUT)},
    )
