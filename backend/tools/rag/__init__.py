"""Retrieval over the user's uploaded documents (txt, md, pdf, docx, html).

Documents are cut into passages and indexed in one SQLite database per user:
FTS5 with BM25 always (no model download), plus embeddings ranked by cosine
similarity and fused with BM25 when an `Embedder` (Ollama's `bge-m3`) is given.
`rag_retrieval` is the agent's tool: numbered passages with source and page,
which the answer cites as [1], [2], ...
"""

from __future__ import annotations

from backend.tools.rag.chunking import Chunk, chunk_sections, split_passages
from backend.tools.rag.documents import (
    RAG_EXTENSIONS,
    Section,
    UnreadableDocument,
    UnsupportedDocument,
)
from backend.tools.rag.index import (
    DocumentNotFound,
    IndexedFile,
    IndexingRefused,
    RagIndex,
    Retrieval,
)
from backend.tools.rag.query import match_expression, query_terms
from backend.tools.rag.store import Passage
from backend.tools.rag.tool import RagResult, rag_retrieval

__all__ = [
    "RAG_EXTENSIONS",
    "Chunk",
    "DocumentNotFound",
    "IndexedFile",
    "IndexingRefused",
    "Passage",
    "RagIndex",
    "RagResult",
    "Retrieval",
    "Section",
    "UnreadableDocument",
    "UnsupportedDocument",
    "chunk_sections",
    "match_expression",
    "query_terms",
    "rag_retrieval",
    "split_passages",
]
