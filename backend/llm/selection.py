"""Choosing the LLM backend at start-up, and saying loudly which one and why."""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx

from backend.config import Settings
from backend.llm.backends import LLMBackend, OllamaBackend, OpenAIBackend
from backend.llm.in_process import EmbeddedBackend, ScriptedBackend

logger = logging.getLogger(__name__)

_PROBE_TIMEOUT = 1.0


def probe_ollama(host: str, timeout: float = _PROBE_TIMEOUT) -> list[str] | None:
    """The models Ollama has pulled, or None if it does not answer within `timeout`."""
    try:
        response = httpx.get(f"{host}/api/tags", timeout=timeout)
        response.raise_for_status()
        return [entry["name"] for entry in response.json().get("models", [])]
    except (httpx.HTTPError, ValueError, KeyError):
        return None


def _choose_automatically(settings: Settings) -> LLMBackend:
    models = probe_ollama(settings.OLLAMA_HOST)
    if models is None:
        reason = f"Ollama did not answer at {settings.OLLAMA_HOST} within {_PROBE_TIMEOUT:g} s"
        return EmbeddedBackend(settings, f"auto: {reason}")
    wanted = settings.OLLAMA_MODEL
    if wanted and wanted not in models and f"{wanted}:latest" not in models:
        reason = f"Ollama has no model '{wanted}' (run `ollama pull {wanted}`)"
        return EmbeddedBackend(settings, f"auto: {reason}")
    if not models:
        reason = "Ollama answered but has no models (run `ollama pull <model>`)"
        return EmbeddedBackend(settings, f"auto: {reason}")
    settings = settings.model_copy(update={"OLLAMA_MODEL": wanted or models[0]})
    return OllamaBackend(settings, f"auto: Ollama answered at {settings.OLLAMA_HOST}")


def create_llm_backend(settings: Settings) -> LLMBackend:
    if settings.LLM_BACKEND == "auto":
        backend = _choose_automatically(settings)
    else:
        backends: dict[str, Callable[[Settings, str], LLMBackend]] = {
            "ollama": OllamaBackend,
            "openai": OpenAIBackend,
            "embedded": EmbeddedBackend,
            "scripted": ScriptedBackend,
        }
        backend = backends[settings.LLM_BACKEND](settings, "set by LLM_BACKEND")
    banner = f"LLM backend: {backend.name}, model {backend.default_model or '(first pulled)'}"
    logger.warning("%s\n  %s\n  why: %s\n%s", "=" * 64, banner, backend.reason, "=" * 64)
    return backend
