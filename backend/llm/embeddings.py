"""`/v1/embeddings` per backend: Ollama's `/api/embed`, an OpenAI upstream as is.

The embedded and scripted backends have no embedding model, so they refuse
with the fix rather than invent vectors.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx
import numpy as np

from backend.llm.backends import LLMBackend, OllamaBackend, OpenAIBackend
from backend.llm.embedder import EmbeddingFailed, OllamaEmbedder
from backend.llm.errors import LLMError

NO_EMBEDDINGS = (
    "Embeddings need Ollama or an OpenAI-compatible upstream: the {name} backend has no "
    "embedding model. Set LLM_BACKEND=ollama (and `ollama pull bge-m3`) or LLM_BACKEND=openai."
)


async def create_embeddings(
    backend: LLMBackend, model: str, texts: list[str], encoding_format: str, extra: dict[str, Any]
) -> dict[str, Any]:
    """An OpenAI embeddings response for `texts`; `extra` holds parameters to pass on."""
    if isinstance(backend, OpenAIBackend):
        body = {"model": model, "input": texts, "encoding_format": encoding_format, **extra}
        return await _forwarded(backend, body)
    if not isinstance(backend, OllamaBackend):
        raise LLMError(NO_EMBEDDINGS.format(name=backend.name), status_code=400)
    if extra:
        name = next(iter(extra))
        raise LLMError(
            f"Unsupported parameter: '{name}' is not supported with Ollama embeddings.",
            status_code=400,
            code="unsupported_parameter",
        )
    embedder = OllamaEmbedder(backend.host, model, timeout=backend.timeout)
    try:
        vectors, tokens = await embedder.embed_with_usage(texts)
    except EmbeddingFailed as exc:
        if "ollama pull" in str(exc):
            raise LLMError(f"{exc}.", status_code=404, code="model_not_found") from None
        raise LLMError(f"{exc}.", status_code=502) from None
    data = [
        {"object": "embedding", "index": i, "embedding": _encoded(v, encoding_format)}
        for i, v in enumerate(vectors)
    ]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}


def _encoded(vector: list[float], encoding_format: str) -> list[float] | str:
    if encoding_format == "base64":  # what the openai SDK asks for by default
        return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")
    return vector


async def _forwarded(backend: OpenAIBackend, body: dict[str, Any]) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {backend.api_key}"}
    try:
        async with httpx.AsyncClient(timeout=backend.timeout) as client:
            response = await client.post(
                f"{backend.base_url}/embeddings", json=body, headers=headers
            )
    except httpx.HTTPError:
        raise backend.explain(ConnectionError()) from None
    if response.status_code != 200:
        raise LLMError(
            f"The upstream at {backend.base_url} answered {response.status_code}: "
            f"{response.text[:200]}",
            status_code=502 if response.status_code >= 500 else response.status_code,
        )
    answer: dict[str, Any] = response.json()
    return answer
