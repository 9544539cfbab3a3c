"""Issue 41: each model's profile is its own, not its backend's: an operator's word, else
a probe at its first use (backend/llm/model_probe.py), against stand-in models."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from backend.config import load_settings
from backend.llm.backends import OllamaBackend
from backend.llm.profile import CAPABLE, CAPABLE_NATIVE_TOOLS, SMALL
from tests.support.live_server import free_port
from tests.support.stand_in_models import StandIn, StandInOllama

# The backend's LangChain clients are kept per model, and bound to the loop that used them.
pytestmark = pytest.mark.asyncio(loop_scope="module")

MODELS = {
    "wide:latest": StandIn(window=32_768),
    "narrow:latest": StandIn(window=2_048),
    "prose:latest": StandIn(window=32_768, calls_tools=False),
    "tiny:latest": StandIn(window=32_768, calls_tools=False, fills_json=False),
}


@pytest.fixture(scope="module")
def ollama() -> Iterator[StandInOllama]:
    with StandInOllama(free_port(), MODELS) as server:
        yield server


def _backend(ollama: StandInOllama, **env: Any) -> OllamaBackend:
    return OllamaBackend(load_settings(LLM_BACKEND="ollama", OLLAMA_HOST=ollama.url, **env), "t")


def _asked(ollama: StandInOllama, model: str) -> int:
    return sum(1 for body in ollama.requests if body["model"] == model)


async def test_each_model_is_probed_into_a_profile_of_its_own(ollama: StandInOllama) -> None:
    backend = _backend(ollama)
    found = {name: await backend.abilities(name) for name in MODELS}
    assert {name: known.source for name, known in found.items()} == dict.fromkeys(MODELS, "probe")
    # A large window (capped by OLLAMA_NUM_CTX's 8,192), tools in the API's format: all paths.
    assert found["wide:latest"].profile == CAPABLE_NATIVE_TOOLS
    assert found["wide:latest"].window == 8_192
    # The same model with 2,048 tokens: each stage gets a short prompt of its own.
    assert found["narrow:latest"].profile == replace(CAPABLE_NATIVE_TOOLS, long_context=False)
    assert found["narrow:latest"].window == 2_048
    # Prose where a tool call was asked for: a client's tools are offered in a prompt.
    assert found["prose:latest"].profile == CAPABLE
    assert (found["prose:latest"].follows_tools, found["prose:latest"].honours_schema) == (
        False,
        True,
    )
    # The wrong values in the schema's shape: the embedded model's paths.
    assert found["tiny:latest"].profile == SMALL
    assert found["tiny:latest"].public()["size"] == "small"
    assert found["tiny:latest"].public()["probe"] == {
        "follows_tools": False,
        "honours_schema": False,
    }


async def test_a_model_is_probed_once_however_many_turns_ask_at_once(
    ollama: StandInOllama,
) -> None:
    backend = _backend(ollama)
    before = _asked(ollama, "wide:latest")
    found = await asyncio.gather(*(backend.abilities("wide:latest") for _ in range(5)))
    assert len({id(known) for known in found}) == 1
    assert _asked(ollama, "wide:latest") - before == 2  # the tool call and the JSON reply
    await backend.abilities("wide:latest")
    assert _asked(ollama, "wide:latest") - before == 2


async def test_an_operators_word_takes_the_place_of_the_probe(ollama: StandInOllama) -> None:
    said = {"tiny:latest": {"context_window": 4_096}, "wide:latest": {"size": "small"}}
    backend = _backend(ollama, MODEL_PROFILES=said)
    before = len(ollama.requests)
    tiny, wide = await backend.abilities("tiny:latest"), await backend.abilities("wide:latest")
    assert len(ollama.requests) == before  # neither was asked anything
    assert (tiny.source, tiny.window) == ("setting", 4_096)
    assert tiny.profile == replace(CAPABLE_NATIVE_TOOLS, long_context=False)
    assert await backend.context_window("tiny:latest") == 4_096  # prompts are fitted to it
    assert wide.profile == SMALL


async def test_with_the_probe_off_every_model_has_the_backends_profile(
    ollama: StandInOllama,
) -> None:
    backend = _backend(ollama, MODEL_PROBE="false")
    before = len(ollama.requests)
    tiny = await backend.abilities("tiny:latest")
    assert (tiny.source, tiny.profile) == ("backend", CAPABLE_NATIVE_TOOLS)
    assert len(ollama.requests) == before


async def test_a_probe_that_fails_is_tried_again_at_the_next_use() -> None:
    port = free_port()
    backend = OllamaBackend(
        load_settings(LLM_BACKEND="ollama", OLLAMA_HOST=f"http://127.0.0.1:{port}"), "t"
    )
    missing = await backend.abilities("wide:latest")  # nothing answers: the backend's own
    assert (missing.source, missing.profile) == ("backend", CAPABLE_NATIVE_TOOLS)
    with StandInOllama(port, MODELS):
        assert (await backend.abilities("wide:latest")).source == "probe"
