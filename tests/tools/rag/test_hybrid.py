"""Hybrid search: BM25 and cosine ranks fused; keyword search alone when embeddings fail."""

from __future__ import annotations

import json
import math
import re

import httpx
import pytest

from backend.llm.embedder import EmbeddingFailed, OllamaEmbedder, embedder_for_backend
from backend.tools.rag import RagIndex
from backend.tools.rag.embeddings import pack_vector, unpack_vector
from tests.tools.rag.conftest import MakeIndex, Upload

SESSION = "u1-session-h"

# Words of one topic share a dimension: a tiny, deterministic "semantic" model.
TOPICS = {
    "car": 0,
    "automobile": 0,
    "vehicle": 0,
    "engine": 0,
    "brakes": 0,
    "tyres": 0,
    "museum": 1,
    "painting": 1,
    "gallery": 1,
    "sculpture": 1,
    "banana": 2,
    "fruit": 2,
}


class TopicEmbedder:
    """Counts topic words per dimension (a text with none gets a zero vector, never stored)."""

    model = "fake-topics"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(texts)
        vectors = []
        for text in texts:
            vector = [0.0, 0.0, 0.0]
            for word in re.findall(r"[a-z]+", text.lower()):
                if word in TOPICS:
                    vector[TOPICS[word]] += 1.0
            vectors.append(vector)
        return vectors


class BrokenEmbedder:
    model = "broken"

    async def embed(self, texts: list[str]) -> list[list[float]]:
        raise EmbeddingFailed("Ollama did not answer at http://127.0.0.1:9 (ConnectError)")


async def _corpus(upload: Upload, index: RagIndex) -> None:
    # BM25 for "automobile maintenance": museum.txt has both words, garage.txt one.
    upload(
        SESSION,
        "museum.txt",
        "Automobile maintenance closes the museum gallery, painting and sculpture rooms.",
    )
    upload(SESSION, "garage.txt", "Maintenance: check the engine, the brakes and the car.")
    upload(SESSION, "tyres.txt", "Every vehicle needs new tyres each winter, and a banana.")
    upload(SESSION, "fruit.txt", "A banana is a fruit.")
    await index.index_session(1, SESSION)


async def test_embeddings_change_the_ranking(make_index: MakeIndex, upload: Upload) -> None:
    keyword_only = make_index()
    await _corpus(upload, keyword_only)
    bm25 = await keyword_only.retrieve(1, "automobile maintenance")
    assert bm25.method == "bm25" and bm25.note is None
    assert [p.source for p in bm25.passages] == ["uploads/museum.txt", "uploads/garage.txt"]

    hybrid_index = make_index(TopicEmbedder())
    await hybrid_index.index_session(1, SESSION)  # adds the vectors; the passages are unchanged
    hybrid = await hybrid_index.retrieve(1, "automobile maintenance")
    assert hybrid.method == "hybrid" and hybrid.note is None
    # garage.txt: BM25 rank 2 + cosine rank 1 beats museum.txt: BM25 rank 1, too far by cosine.
    # tyres.txt has no query word but is about vehicles; fruit.txt is about nothing asked.
    assert [p.source for p in hybrid.passages] == [
        "uploads/garage.txt",
        "uploads/museum.txt",
        "uploads/tyres.txt",
    ]
    assert hybrid.passages[0].score == pytest.approx(1 / 61 + 1 / 62)
    assert hybrid.passages[1].score == pytest.approx(1 / 61)


async def test_vectors_are_made_once_and_stored_as_float32(
    make_index: MakeIndex, upload: Upload
) -> None:
    embedder = TopicEmbedder()
    index = make_index(embedder)
    await _corpus(upload, index)
    assert sorted(len(batch) for batch in embedder.calls) == [1, 1, 1, 1]
    await index.index_session(1, SESSION)
    assert len(embedder.calls) == 4  # unchanged files are not embedded again
    blob = pack_vector([3.0, 4.0])
    assert blob is not None and len(blob) == 8
    assert unpack_vector(blob).tolist() == pytest.approx([0.6, 0.8])
    assert pack_vector([0.0, 0.0]) is None and pack_vector([math.nan]) is None


async def test_a_failing_embedder_falls_back_to_bm25_and_says_so(
    make_index: MakeIndex, upload: Upload
) -> None:
    index = make_index(BrokenEmbedder())
    upload(SESSION, "museum.txt", "Automobile maintenance closes the museum gallery and painting.")
    upload(SESSION, "garage.txt", "Maintenance of the car.")
    outcomes = await index.index_session(1, SESSION)
    assert all(o.status == "indexed" and "not embedded" in (o.note or "") for o in outcomes)
    assert "Ollama did not answer" in (outcomes[0].note or "")
    assert outcomes[1].note == "not embedded: embeddings are unavailable"  # not tried again
    result = await index.retrieve(1, "automobile maintenance")
    assert result.method == "bm25"
    assert [p.source for p in result.passages] == ["uploads/museum.txt", "uploads/garage.txt"]
    assert result.note is not None and "keywords only" in result.note
    assert "Ollama did not answer" in result.note

    index.embedder = TopicEmbedder()  # Ollama is back: the next indexing fills the vectors in
    await index.index_session(1, SESSION)
    assert (await index.retrieve(1, "automobile maintenance")).method == "hybrid"
    assert [p.source for p in await index.search(1, "automobile maintenance")] == [
        "uploads/garage.txt",
        "uploads/museum.txt",
    ]


def _ollama(handler: httpx.MockTransport) -> OllamaEmbedder:
    return OllamaEmbedder("http://127.0.0.1:11434/", transport=handler)


async def test_ollama_embedder_posts_to_api_embed() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        count = len(json.loads(request.content)["input"])
        return httpx.Response(200, json={"model": "bge-m3", "embeddings": [[1, 0.5]] * count})

    vectors = await _ollama(httpx.MockTransport(answer)).embed(["a", "b"])
    assert vectors == [[1.0, 0.5], [1.0, 0.5]]
    assert str(seen[0].url) == "http://127.0.0.1:11434/api/embed"
    assert json.loads(seen[0].content) == {"model": "bge-m3", "input": ["a", "b"]}


@pytest.mark.parametrize(
    ("response", "message"),
    [
        (httpx.Response(404, json={"error": 'model "bge-m3" not found'}), "ollama pull bge-m3"),
        (httpx.Response(500, text="boom"), "answered 500"),
        (httpx.Response(200, text="not json"), "JSON"),
        (httpx.Response(200, json={"embeddings": [[1.0]]}), "one vector per text"),
        (httpx.Response(200, json={"embeddings": [[1.0], [1.0, 2.0]]}), "malformed"),
        (httpx.Response(200, json={"embeddings": [["x"], [1.0]]}), "malformed"),
    ],
)
async def test_ollama_embedder_failures_are_embedding_failed(
    response: httpx.Response, message: str
) -> None:
    embedder = _ollama(httpx.MockTransport(lambda request: response))
    with pytest.raises(EmbeddingFailed, match=message):
        await embedder.embed(["a", "b"])


async def test_an_unreachable_ollama_is_embedding_failed() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(EmbeddingFailed, match="did not answer"):
        await _ollama(httpx.MockTransport(refuse)).embed(["a"])


async def test_an_index_over_a_missing_ollama_model_still_answers(
    make_index: MakeIndex, upload: Upload
) -> None:
    missing = httpx.MockTransport(lambda request: httpx.Response(404, json={"error": "not found"}))
    index = make_index(_ollama(missing))
    upload(SESSION, "doc.txt", "Ocelots are small wild cats.")
    await index.index_session(1, SESSION)
    result = await index.retrieve(1, "ocelots")
    assert [p.source for p in result.passages] == ["uploads/doc.txt"]
    assert result.method == "bm25" and "ollama pull bge-m3" in (result.note or "")


def test_embeddings_come_with_the_ollama_backend_only() -> None:
    embedder = embedder_for_backend("ollama", "http://127.0.0.1:11434")
    assert isinstance(embedder, OllamaEmbedder) and embedder.model == "bge-m3"
    assert embedder_for_backend("embedded", "http://127.0.0.1:11434") is None
