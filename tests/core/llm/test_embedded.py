"""The embedded llama.cpp model, for real: streaming, JSON schemas, cancellation."""

from __future__ import annotations

import asyncio
import time

import pytest
from pydantic import BaseModel

from backend.llm.embedded import EmbeddedChatModel, shipped_model_path


@pytest.fixture(scope="module")
def model() -> EmbeddedChatModel:
    loaded = EmbeddedChatModel(model_path=str(shipped_model_path()), n_ctx=2048)
    loaded.load()
    return loaded


def test_the_weights_ship_with_the_package() -> None:
    path = shipped_model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert path.stat().st_size > 50_000_000


def test_invoke_answers_with_usage(model: EmbeddedChatModel) -> None:
    reply = model.invoke("What is the capital of France? Answer in one word.", max_tokens=16)
    assert isinstance(reply.content, str) and reply.content.strip()
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["output_tokens"] >= 1
    assert reply.usage_metadata["input_tokens"] > 5


async def test_astream_yields_tokens_incrementally(model: EmbeddedChatModel) -> None:
    chunks = [c async for c in model.astream("Count from one to ten.", max_tokens=24)]
    texts = [c.content for c in chunks if c.content]
    assert len(texts) >= 5
    usage = [c.usage_metadata for c in chunks if c.usage_metadata]
    assert len(usage) == 1 and usage[0]["output_tokens"] == len(texts)


class City(BaseModel):
    name: str
    country: str
    population_millions: float


def test_structured_output_follows_the_schema(model: EmbeddedChatModel) -> None:
    structured = model.with_structured_output(City)
    city = structured.invoke("Describe Paris as JSON.", max_tokens=80)
    assert isinstance(city, City)


def test_json_schema_dict_is_parsed(model: EmbeddedChatModel) -> None:
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
    }
    result = model.with_structured_output(schema).invoke("What is 2 + 2?", max_tokens=20)
    assert isinstance(result, dict) and isinstance(result["answer"], int)


async def test_abandoning_a_stream_stops_generation(model: EmbeddedChatModel) -> None:
    stream = model.astream("Write a very long essay about the sea.", max_tokens=2000)
    async for chunk in stream:
        if chunk.content:
            break
    started = time.monotonic()
    await stream.aclose()
    # The generation lock frees within a token or two; 2000 tokens would take ~30 s.
    reply = await asyncio.wait_for(model.ainvoke("Say hi.", max_tokens=2), timeout=30)
    assert reply.content is not None
    assert time.monotonic() - started < 3


async def test_logprobs_come_from_the_logits_llama_cpp_samples_from(
    model: EmbeddedChatModel,
) -> None:
    question = "What is the capital of France? One word."
    for max_tokens in (4, 40):  # cut by the length limit, and ended by the model
        chunks = [
            c
            async for c in model.astream(
                question, logprobs=True, top_logprobs=2, temperature=0, max_tokens=max_tokens
            )
        ]
        texts = [c.text for c in chunks if c.text]
        entries = [e for c in chunks for e in c.response_metadata.get("logprobs") or []]
        # One entry per token, aligned with the chunk that carries its text.
        for chunk in chunks:
            if chunk.text:
                carried = chunk.response_metadata["logprobs"]
                assert "".join(e["token"] for e in carried) == chunk.text
        assert len(entries) == len(texts) and all(e["logprob"] <= 0 for e in entries)
        for entry in entries:  # greedy decoding: the chosen token is the likeliest
            best, second = entry["top_logprobs"]
            assert best["token"] == entry["token"] and best["logprob"] >= second["logprob"]
            assert bytes(entry["bytes"]).decode() == entry["token"]
    plain = [c async for c in model.astream(question, temperature=0, max_tokens=4)]
    assert not any(c.response_metadata.get("logprobs") for c in plain)
