"""Embedding clients: the `Embedder` protocol and Ollama's `/api/embed`.

Any failure of the embedder raises `EmbeddingFailed`, which the RAG index turns
into keyword-only search.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import httpx

DEFAULT_EMBEDDING_MODEL = "bge-m3"
DEFAULT_TIMEOUT = 60.0
_CONNECT_TIMEOUT = 5.0


class EmbeddingFailed(Exception):
    """The embedder did not return usable vectors; the message says why."""


class Embedder(Protocol):
    """Turns texts into vectors; `model` names them, so vectors of another model are ignored."""

    @property
    def model(self) -> str: ...

    async def embed(self, texts: list[str]) -> list[list[float]]: ...


class OllamaEmbedder:
    """`POST {host}/api/embed` with `{"model": ..., "input": [...]}`."""

    def __init__(
        self,
        host: str,
        model: str = DEFAULT_EMBEDDING_MODEL,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.host = host.rstrip("/")
        self._model = model
        self._timeout = httpx.Timeout(timeout, connect=_CONNECT_TIMEOUT)
        self._transport = transport

    @property
    def model(self) -> str:
        return self._model

    async def embed(self, texts: list[str]) -> list[list[float]]:
        vectors, _ = await self.embed_with_usage(texts)
        return vectors

    async def embed_with_usage(self, texts: list[str]) -> tuple[list[list[float]], int]:
        """The vectors, and how many tokens Ollama read (0 if it does not say)."""
        if not texts:
            return [], 0
        try:
            async with httpx.AsyncClient(
                timeout=self._timeout, transport=self._transport
            ) as client:
                response = await client.post(
                    f"{self.host}/api/embed", json={"model": self._model, "input": texts}
                )
        except httpx.HTTPError as exc:
            raise EmbeddingFailed(
                f"Ollama did not answer at {self.host} ({type(exc).__name__})"
            ) from None
        if response.status_code != 200:
            raise EmbeddingFailed(self._refusal(response))
        try:
            body = response.json()
        except ValueError:
            raise EmbeddingFailed(f"{self.host}/api/embed did not answer with JSON") from None
        tokens = body.get("prompt_eval_count") if isinstance(body, dict) else None
        return _checked_vectors(body, len(texts)), tokens if isinstance(tokens, int) else 0

    def _refusal(self, response: httpx.Response) -> str:
        try:
            detail = str(response.json().get("error", ""))[:200]
        except (ValueError, AttributeError):
            detail = ""
        if response.status_code == 404:
            return (
                f"Ollama at {self.host} has no embedding model '{self._model}' "
                f"(run `ollama pull {self._model}`){': ' + detail if detail else ''}"
            )
        return f"Ollama at {self.host} answered {response.status_code}: {detail or 'no detail'}"


def _checked_vectors(body: Any, count: int) -> list[list[float]]:
    vectors = body.get("embeddings") if isinstance(body, dict) else None
    if not isinstance(vectors, list) or len(vectors) != count:
        raise EmbeddingFailed("the embedding answer does not hold one vector per text")
    dimension = len(vectors[0]) if isinstance(vectors[0], list) else 0
    for vector in vectors:
        if (
            not isinstance(vector, list)
            or len(vector) != dimension
            or dimension == 0
            or not all(isinstance(x, int | float) and math.isfinite(x) for x in vector)
        ):
            raise EmbeddingFailed("the embedding answer holds malformed vectors")
    return [[float(x) for x in vector] for vector in vectors]


def embedder_for_backend(backend_name: str, ollama_host: str) -> Embedder | None:
    """Ollama's `bge-m3` when Ollama is the LLM backend; otherwise keyword search only."""
    return OllamaEmbedder(ollama_host) if backend_name == "ollama" else None
