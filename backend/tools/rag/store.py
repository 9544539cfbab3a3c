"""One SQLite database per user: passages in FTS5, vectors in a side table.

`DATA_DIR/rag/user_<id>.sqlite3` (WAL) holds:
- `passages`, an FTS5 table: the indexed `text`, and unindexed session_id,
  source, page, section, chunk, file_size and file_mtime;
- `documents`, one row per indexed file with the size and mtime it had, so an
  unchanged file is recognised without reading it (and why it could not be
  read, so an unchanged damaged file is not parsed again);
- `vectors`, one L2-normalised float32 blob per passage and the model that made it.

Every method is blocking: `RagIndex` calls them through `asyncio.to_thread`.
A connection is opened per call, since sqlite3 connections stay in one thread.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from backend.storage.sessions import SessionKey
from backend.tools.rag.chunking import Chunk
from backend.tools.rag.embeddings import Vector

_SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS passages USING fts5(
    text,
    session_id UNINDEXED, source UNINDEXED, page UNINDEXED, section UNINDEXED,
    chunk UNINDEXED, file_size UNINDEXED, file_mtime UNINDEXED,
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TABLE IF NOT EXISTS documents (
    session_id TEXT NOT NULL,
    source TEXT NOT NULL,
    file_size INTEGER NOT NULL,
    file_mtime INTEGER NOT NULL,
    chunks INTEGER NOT NULL,
    error TEXT,
    PRIMARY KEY (session_id, source)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vectors (
    passage_id INTEGER PRIMARY KEY,
    model TEXT NOT NULL,
    vector BLOB NOT NULL
);
"""
_COLUMNS = "passages.rowid, session_id, source, page, section, chunk, text"
_BUSY_TIMEOUT = 10.0
_VECTOR_BATCH = 4096

FileVersion = tuple[int, int]
"""A file's size in bytes and its modification time in nanoseconds."""


@dataclass(frozen=True)
class IndexedDocument:
    version: FileVersion
    chunks: int
    error: str | None


@dataclass(frozen=True)
class Passage:
    """A retrieved passage; `score` is higher for better matches (BM25 or fused)."""

    id: int
    session_id: str  # the key its document was indexed under, as stored
    source: str
    page: int | None
    section: str | None
    chunk: int
    text: str
    score: float = 0.0


def _passage(row: Sequence[Any], score: float) -> Passage:
    rowid, session_id, source, page, section, chunk, text = row[:7]
    return Passage(
        id=int(rowid),
        session_id=str(session_id),
        source=str(source),
        page=page if isinstance(page, int) else None,
        section=section if isinstance(section, str) else None,
        chunk=int(chunk),
        text=str(text),
        score=score,
    )


class PassageStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._ready: set[Path] = set()
        self._lock = threading.Lock()

    def path(self, user_id: int) -> Path:
        if isinstance(user_id, bool) or not isinstance(user_id, int) or user_id < 0:
            raise ValueError(f"not a user id: {user_id!r}")
        return self.root / f"user_{user_id}.sqlite3"

    def exists(self, user_id: int) -> bool:
        return self.path(user_id).is_file()

    @contextlib.contextmanager
    def _connect(self, user_id: int) -> Iterator[sqlite3.Connection]:
        path = self.path(user_id)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        fresh = path not in self._ready or not path.exists()
        connection = sqlite3.connect(path, timeout=_BUSY_TIMEOUT, isolation_level=None)
        try:
            with self._lock:
                if fresh:
                    connection.execute("PRAGMA journal_mode = WAL")
                    connection.executescript(_SCHEMA)
                    self._ready.add(path)
            connection.execute("PRAGMA synchronous = NORMAL")
            yield connection
        finally:
            connection.close()

    @staticmethod
    @contextlib.contextmanager
    def _transaction(connection: sqlite3.Connection) -> Iterator[None]:
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def document(self, user_id: int, session_id: SessionKey, source: str) -> IndexedDocument | None:
        """What was recorded when the file was last indexed, or None."""
        with self._connect(user_id) as connection:
            return _document(connection, session_id, source)

    def replace(
        self,
        user_id: int,
        session_id: SessionKey,
        source: str,
        version: FileVersion,
        chunks: Sequence[Chunk],
        error: str | None = None,
    ) -> list[tuple[int, str]] | None:
        """Swap the file's passages for `chunks` in one transaction; their (id, text).

        None if the file is already indexed at `version` (another request did it).
        A file that could not be read is recorded with no chunks and its `error`.
        """
        size, mtime = version
        with self._connect(user_id) as connection, self._transaction(connection):
            known = _document(connection, session_id, source)
            if known is not None and known.version == version:
                return None
            _delete(connection, session_id, source)
            added = []
            for chunk in chunks:
                cursor = connection.execute(
                    "INSERT INTO passages (text, session_id, source, page, section, chunk, "
                    "file_size, file_mtime) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (*_chunk_row(chunk, session_id, source), size, mtime),
                )
                added.append((int(cursor.lastrowid or 0), chunk.text))
            connection.execute(
                "INSERT INTO documents (session_id, source, file_size, file_mtime, chunks, error) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, source, size, mtime, len(chunks), error),
            )
            return added

    def remove(self, user_id: int, session_id: SessionKey, source: str) -> None:
        with self._connect(user_id) as connection, self._transaction(connection):
            _delete(connection, session_id, source)

    def sources(self, user_id: int, session_id: SessionKey) -> list[str]:
        with self._connect(user_id) as connection:
            rows = connection.execute(
                "SELECT source FROM documents WHERE session_id = ? ORDER BY source", (session_id,)
            )
            return [str(row[0]) for row in rows]

    def forget_session(self, user_id: int, session_id: SessionKey) -> None:
        """Drop every passage of a session (when the session is deleted)."""
        if not self.exists(user_id):
            return
        with self._connect(user_id) as connection, self._transaction(connection):
            for source in [
                row[0]
                for row in connection.execute(
                    "SELECT source FROM documents WHERE session_id = ?", (session_id,)
                )
            ]:
                _delete(connection, session_id, source)

    def unembedded(
        self, user_id: int, session_id: SessionKey, source: str, model: str
    ) -> list[tuple[int, str]]:
        """(id, text) of the file's passages with no vector from `model`."""
        with self._connect(user_id) as connection:
            rows = connection.execute(
                "SELECT passages.rowid, text FROM passages LEFT JOIN vectors "
                "ON vectors.passage_id = passages.rowid AND vectors.model = ? "
                "WHERE session_id = ? AND source = ? AND vectors.passage_id IS NULL",
                (model, session_id, source),
            )
            return [(int(row[0]), str(row[1])) for row in rows]

    def store_vectors(
        self, user_id: int, model: str, items: Sequence[tuple[int, str, bytes]]
    ) -> int:
        """Save (id, text, vector) triples whose passage still holds that text; how many."""
        stored = 0
        with self._connect(user_id) as connection, self._transaction(connection):
            for passage_id, text, blob in items:
                row = connection.execute(
                    "SELECT text FROM passages WHERE rowid = ?", (passage_id,)
                ).fetchone()
                if row is None or row[0] != text:  # re-indexed meanwhile; the id may be reused
                    continue
                connection.execute(
                    "INSERT OR REPLACE INTO vectors (passage_id, model, vector) VALUES (?, ?, ?)",
                    (passage_id, model, blob),
                )
                stored += 1
        return stored

    def keyword_search(
        self, user_id: int, expression: str, limit: int, session_id: SessionKey | None
    ) -> list[Passage]:
        """The best `limit` passages for an FTS5 MATCH `expression`, by BM25."""
        if not self.exists(user_id):
            return []
        where, arguments = "passages MATCH ?", [expression]
        if session_id is not None:
            where, arguments = where + " AND session_id = ?", [*arguments, session_id]
        with self._connect(user_id) as connection:
            rows = connection.execute(
                f"SELECT {_COLUMNS}, bm25(passages) AS rank FROM passages "
                f"WHERE {where} ORDER BY rank LIMIT ?",
                (*arguments, limit),
            ).fetchall()
        return [_passage(row, -float(row[7])) for row in rows]

    def nearest(
        self,
        user_id: int,
        model: str,
        query: Vector,
        limit: int,
        session_id: SessionKey | None,
        min_similarity: float,
    ) -> list[tuple[int, float]]:
        """(id, cosine) of the `limit` passages closest to the unit vector `query`."""
        if not self.exists(user_id):
            return []
        sql = "SELECT passage_id, vector FROM vectors WHERE model = ?"
        arguments: tuple[str, ...] = (model,)
        if session_id is not None:
            sql = (
                "SELECT passage_id, vector FROM vectors JOIN passages "
                "ON passages.rowid = vectors.passage_id WHERE model = ? AND session_id = ?"
            )
            arguments = (model, session_id)
        best_ids = np.empty(0, dtype=np.int64)
        best_scores = np.empty(0, dtype=np.float32)
        width = query.shape[0] * 4
        with self._connect(user_id) as connection:
            cursor = connection.execute(sql, arguments)
            while rows := cursor.fetchmany(_VECTOR_BATCH):
                usable = [(row[0], row[1]) for row in rows if len(row[1]) == width]
                if not usable:
                    continue
                ids = np.array([passage_id for passage_id, _ in usable], dtype=np.int64)
                matrix = np.frombuffer(b"".join(blob for _, blob in usable), dtype="<f4")
                scores = matrix.reshape(len(usable), -1) @ query
                best_ids = np.concatenate([best_ids, ids])
                best_scores = np.concatenate([best_scores, scores.astype(np.float32)])
                if len(best_ids) > limit:
                    keep = np.argpartition(-best_scores, limit)[:limit]
                    best_ids, best_scores = best_ids[keep], best_scores[keep]
        order = np.argsort(-best_scores, kind="stable")
        return [
            (int(best_ids[i]), float(best_scores[i]))
            for i in order
            if best_scores[i] >= min_similarity
        ]

    def passages(self, user_id: int, ids: Sequence[int]) -> dict[int, Passage]:
        if not ids or not self.exists(user_id):
            return {}
        marks = ", ".join("?" * len(ids))
        with self._connect(user_id) as connection:
            rows = connection.execute(
                f"SELECT {_COLUMNS} FROM passages WHERE rowid IN ({marks})", tuple(ids)
            ).fetchall()
        return {int(row[0]): _passage(row, 0.0) for row in rows}


def _chunk_row(chunk: Chunk, session_id: SessionKey, source: str) -> tuple[object, ...]:
    return (chunk.text, session_id, source, chunk.page, chunk.section, chunk.index)


def _document(
    connection: sqlite3.Connection, session_id: SessionKey, source: str
) -> IndexedDocument | None:
    row = connection.execute(
        "SELECT file_size, file_mtime, chunks, error FROM documents "
        "WHERE session_id = ? AND source = ?",
        (session_id, source),
    ).fetchone()
    if row is None:
        return None
    return IndexedDocument((int(row[0]), int(row[1])), int(row[2]), row[3])


def _delete(connection: sqlite3.Connection, session_id: SessionKey, source: str) -> None:
    connection.execute(
        "DELETE FROM vectors WHERE passage_id IN "
        "(SELECT rowid FROM passages WHERE session_id = ? AND source = ?)",
        (session_id, source),
    )
    connection.execute(
        "DELETE FROM passages WHERE session_id = ? AND source = ?", (session_id, source)
    )
    connection.execute(
        "DELETE FROM documents WHERE session_id = ? AND source = ?", (session_id, source)
    )
