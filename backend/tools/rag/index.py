"""`RagIndex`: indexing a session's uploaded documents, and searching them per user.

Indexing is incremental: a file whose size and mtime match what was indexed is
skipped; a changed one has its passages replaced in one transaction. Workspace
files are opened through `Workspaces` (links are never followed) and PDF, Word
and HTML files are parsed in the isolated helper process. Search is BM25 over
FTS5; with an `Embedder` it is hybrid, fusing the BM25 and cosine rankings by
reciprocal rank, and falls back to BM25 alone (saying so) if the embedder fails.
Blocking work (SQLite, parsing) runs in threads, off the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import defaultdict
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from backend.files.isolation import IsolatedCallFailed, IsolatedRunner
from backend.llm.embedder import Embedder
from backend.storage.sessions import SessionKey
from backend.storage.workspaces import NotARegularFile, Workspaces, safe_relative
from backend.tools.rag.chunking import chunk_sections
from backend.tools.rag.documents import (
    ISOLATED_EXTENSIONS,
    RAG_EXTENSIONS,
    Section,
    SectionRow,
    UnsupportedDocument,
    extension_of,
    read_sections,
    section_rows,
)
from backend.tools.rag.embeddings import pack_vector, unpack_vector
from backend.tools.rag.query import match_expression
from backend.tools.rag.store import FileVersion, Passage, PassageStore

logger = logging.getLogger(__name__)

DATA_FOLDER = "uploads/"
MAX_K = 20
CANDIDATES = 50
"""How many passages each ranking contributes to the fusion."""
RRF_K = 60
DEFAULT_MIN_SIMILARITY = 0.45
"""A passage found only by embeddings must be at least this close (cosine) to count."""
EMBED_BATCH = 32
READ_TIMEOUT = 120.0
"""Seconds the helper may spend on one document: whole documents are read, not samples."""

IndexStatus = Literal["indexed", "unchanged", "failed", "removed"]
SearchMethod = Literal["bm25", "hybrid"]


class DocumentNotFound(LookupError):
    """No such regular file in the session's uploads."""


@dataclass(frozen=True)
class IndexedFile:
    """What indexing did to one file; `chunks` counts passages written (0 if unchanged).

    "failed" has the reason in `error`; an unchanged file that failed before is
    reported as failed again without being read.
    """

    source: str
    status: IndexStatus
    chunks: int = 0
    error: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Retrieval:
    passages: list[Passage]
    method: SearchMethod
    note: str | None = None


def document_path(name: str) -> str:
    """The workspace path of an upload (`name` may omit `uploads/`), if it can be indexed."""
    path = name if name.startswith(DATA_FOLDER) else DATA_FOLDER + name
    safe_relative(path)
    if extension_of(path) not in RAG_EXTENSIONS:
        raise UnsupportedDocument(f"{name}: only {', '.join(sorted(RAG_EXTENSIONS))} are indexed")
    return path


class IndexingRefused(Exception):
    """The server's bound on indexing (`RagIndex.place`) refused the work or stopped it."""


class RagIndex:
    def __init__(
        self,
        data_dir: Path,
        *,
        workspaces: Workspaces | None = None,
        runner: IsolatedRunner | None = None,
        embedder: Embedder | None = None,
        min_similarity: float = DEFAULT_MIN_SIMILARITY,
        place: Callable[[int], AbstractAsyncContextManager[None]] | None = None,
    ) -> None:
        """`place(user id)`: held while that user's documents are indexed (the server's
        bound on that work; `IndexingRefused` when it refuses, or ends the work past its
        time)."""
        self.store = PassageStore(data_dir / "rag")
        self.workspaces = workspaces or Workspaces(data_dir)
        self._owns_runner = runner is None
        self.runner = runner or IsolatedRunner(timeout=READ_TIMEOUT)
        self.embedder = embedder
        self.min_similarity = min_similarity
        self.place = place

    def close(self) -> None:
        if self._owns_runner:
            self.runner.close()

    async def index_file(self, user_id: int, session_id: SessionKey, name: str) -> IndexedFile:
        """Index one upload. Raises `DocumentNotFound`, `UnsupportedDocument` or `UnsafePath`."""
        async with self._placed(user_id):
            return await self._index(user_id, session_id, document_path(name), embed=True)

    def _placed(self, user_id: int) -> AbstractAsyncContextManager[None]:
        return self.place(user_id) if self.place is not None else contextlib.nullcontext()

    async def index_session(self, user_id: int, session_id: SessionKey) -> list[IndexedFile]:
        """Index every supported document under uploads/; forget those no longer there.
        `IndexingRefused` when the server refuses the work or it ran too long."""
        async with self._placed(user_id):
            return await self._index_session(user_id, session_id)

    async def _index_session(self, user_id: int, session_id: SessionKey) -> list[IndexedFile]:
        files = await asyncio.to_thread(self.workspaces.list_files, session_id)
        names = [
            entry.path
            for entry in files
            if entry.path.startswith(DATA_FOLDER) and extension_of(entry.path) in RAG_EXTENSIONS
        ]
        outcomes: list[IndexedFile] = []
        embed = True  # after one failure, don't wait on a missing embedder for every file
        for name in names:
            try:
                outcome = await self._index(user_id, session_id, name, embed=embed)
            except DocumentNotFound:  # replaced by a link or deleted meanwhile
                continue
            embed = embed and outcome.note is None
            outcomes.append(outcome)
        indexed = await asyncio.to_thread(self.store.sources, user_id, session_id)
        for source in sorted(set(indexed) - {outcome.source for outcome in outcomes}):
            await asyncio.to_thread(self.store.remove, user_id, session_id, source)
            outcomes.append(IndexedFile(source, "removed"))
        return outcomes

    async def forget_session(self, user_id: int, session_id: SessionKey) -> None:
        await asyncio.to_thread(self.store.forget_session, user_id, session_id)

    async def search(
        self, user_id: int, query: str, k: int = 5, session_id: SessionKey | None = None
    ) -> list[Passage]:
        """The best `k` of the user's passages (of one session, if given), best first."""
        return (await self.retrieve(user_id, query, k, session_id)).passages

    async def retrieve(
        self, user_id: int, query: str, k: int = 5, session_id: SessionKey | None = None
    ) -> Retrieval:
        """Like `search`, also saying how the passages were ranked."""
        k = max(1, min(k, MAX_K))
        expression = match_expression(query)
        if expression is None:
            return Retrieval([], "bm25")
        pool = max(k, CANDIDATES)
        keyword = await asyncio.to_thread(
            self.store.keyword_search, user_id, expression, pool, session_id
        )
        if self.embedder is None:
            return Retrieval(keyword[:k], "bm25")
        model = self.embedder.model
        try:
            blob = pack_vector((await self.embedder.embed([query]))[0])
            if blob is None:
                raise ValueError("the query's vector is zero")
        except Exception as exc:  # any embedder failure must leave keyword search working
            logger.warning("embedding the query failed: %s", exc)
            note = f"Embeddings are unavailable ({exc}); passages are ranked by keywords only."
            return Retrieval(keyword[:k], "bm25", note)
        nearest = await asyncio.to_thread(
            self.store.nearest,
            user_id,
            model,
            unpack_vector(blob),
            pool,
            session_id,
            self.min_similarity,
        )
        fused = await asyncio.to_thread(self._fuse, user_id, keyword, nearest, k)
        return Retrieval(fused, "hybrid")

    def _fuse(
        self, user_id: int, keyword: list[Passage], nearest: list[tuple[int, float]], k: int
    ) -> list[Passage]:
        """Reciprocal-rank fusion: each ranking adds 1 / (RRF_K + rank); ties keep BM25 order."""
        scores: defaultdict[int, float] = defaultdict(float)
        for rank, passage in enumerate(keyword, start=1):
            scores[passage.id] += 1.0 / (RRF_K + rank)
        for rank, (passage_id, _) in enumerate(nearest, start=1):
            scores[passage_id] += 1.0 / (RRF_K + rank)
        best = sorted(scores, key=lambda passage_id: -scores[passage_id])[:k]
        known = {passage.id: passage for passage in keyword}
        known |= self.store.passages(user_id, [i for i in best if i not in known])
        return [replace(known[i], score=scores[i]) for i in best if i in known]

    async def _index(
        self, user_id: int, session_id: SessionKey, source: str, *, embed: bool
    ) -> IndexedFile:
        outcome = await asyncio.to_thread(self._index_file, user_id, session_id, source)
        if self.embedder is None or outcome.status == "failed":
            return outcome
        if not embed:
            return replace(outcome, note="not embedded: embeddings are unavailable")
        note = await self._embed_missing(self.embedder, user_id, session_id, source)
        return replace(outcome, note=note)

    def _index_file(self, user_id: int, session_id: SessionKey, source: str) -> IndexedFile:
        try:
            version = self._version(session_id, source)
        except (OSError, NotARegularFile):
            raise DocumentNotFound(source) from None
        known = self.store.document(user_id, session_id, source)
        if known is not None and known.version == version:
            # a damaged file is not parsed again until it changes
            status: IndexStatus = "unchanged" if known.error is None else "failed"
            return IndexedFile(source, status, error=known.error)
        try:
            sections = self._read(session_id, source)
        except Exception as exc:  # a damaged document can make a parser raise anything
            error = f"{type(exc).__name__}: {exc}"[:300]
            logger.info("not indexed: %s (%s)", source, error)
            # its old passages are out of date: they go, and the failure is remembered
            self.store.replace(user_id, session_id, source, version, [], error)
            return IndexedFile(source, "failed", error=error)
        chunks = chunk_sections(sections)
        added = self.store.replace(user_id, session_id, source, version, chunks)
        return IndexedFile(source, "unchanged" if added is None else "indexed", len(added or []))

    def _version(self, session_id: SessionKey, source: str) -> FileVersion:
        with self.workspaces.open_file(session_id, source) as handle:
            info = os.fstat(handle.fileno())
        return info.st_size, info.st_mtime_ns

    def _read(self, session_id: SessionKey, source: str) -> list[Section]:
        if extension_of(source) not in ISOLATED_EXTENSIONS:
            return read_sections(str(self.workspaces.root.parent), session_id, source)
        try:
            rows = self._read_isolated(session_id, source)
        except IsolatedCallFailed as exc:
            if "crashed" not in str(exc):
                raise
            # The helper also dies when its lifetime CPU limit runs out, whatever file it
            # was reading: a fresh helper gets one more try before the file is blamed.
            rows = self._read_isolated(session_id, source)
        return [Section(text, page, heading) for text, page, heading in rows]

    def _read_isolated(self, session_id: SessionKey, source: str) -> list[SectionRow]:
        """The parsers that a crafted file could take over run in the helper, which sees
        only this file, opened here without following a link."""
        with self.workspaces.open_file(session_id, source) as handle:
            return self.runner.call(section_rows, source, file=handle)

    async def _embed_missing(
        self, embedder: Embedder, user_id: int, session_id: SessionKey, source: str
    ) -> str | None:
        """Embed the file's passages that have no vector yet; a note if that failed."""
        model = embedder.model
        pending = await asyncio.to_thread(self.store.unembedded, user_id, session_id, source, model)
        for start in range(0, len(pending), EMBED_BATCH):
            batch = pending[start : start + EMBED_BATCH]
            try:
                vectors = await embedder.embed([text for _, text in batch])
                if len(vectors) != len(batch):
                    raise ValueError(f"{len(vectors)} vectors for {len(batch)} texts")
            except Exception as exc:  # the passages stay searchable by keywords
                logger.warning("embedding %s failed: %s", source, exc)
                return f"not embedded ({exc}); keyword search still finds it"
            items = [
                (passage_id, text, blob)
                for (passage_id, text), vector in zip(batch, vectors, strict=True)
                if (blob := pack_vector(vector)) is not None
            ]
            await asyncio.to_thread(self.store.store_vectors, user_id, model, items)
        return None
