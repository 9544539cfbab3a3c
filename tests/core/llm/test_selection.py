"""`LLM_BACKEND=auto`: Ollama when it answers, the embedded model otherwise."""

from __future__ import annotations

import logging

import pytest

from backend.config import load_settings
from backend.llm import create_llm_backend
from backend.llm.profile import CAPABLE_NATIVE_TOOLS, SMALL
from tests.support.fake_ollama import FakeOllama
from tests.support.live_server import free_port


def test_auto_uses_ollama_when_it_answers(caplog: pytest.LogCaptureFixture) -> None:
    models = ["llama3.2:latest", "qwen2.5:latest"]
    with FakeOllama(free_port(), models=models) as ollama, caplog.at_level(logging.WARNING):
        backend = create_llm_backend(load_settings(LLM_BACKEND="auto", OLLAMA_HOST=ollama.url))
    assert (backend.name, backend.default_model) == ("ollama", "llama3.2:latest")
    assert backend.profile == CAPABLE_NATIVE_TOOLS
    assert "LLM backend: ollama" in caplog.text
    assert f"Ollama answered at {ollama.url}" in caplog.text


def test_auto_falls_back_to_the_embedded_model_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = f"http://127.0.0.1:{free_port()}"
    with caplog.at_level(logging.WARNING):
        backend = create_llm_backend(load_settings(LLM_BACKEND="auto", OLLAMA_HOST=host))
    assert (backend.name, backend.default_model) == ("embedded", "smollm2-135m-instruct")
    assert backend.profile == SMALL  # spec templates, no review, no plans, capped replies
    assert f"Ollama did not answer at {host}" in caplog.text


def test_auto_skips_ollama_without_the_wanted_model() -> None:
    with FakeOllama(free_port(), models=["llama3.2:latest"]) as ollama:
        settings = load_settings(LLM_BACKEND="auto", OLLAMA_HOST=ollama.url, OLLAMA_MODEL="qwen2.5")
        backend = create_llm_backend(settings)
    assert backend.name == "embedded"
    assert "ollama pull qwen2.5" in backend.reason
