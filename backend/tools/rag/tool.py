"""The `rag_retrieval` tool: numbered passages the agent's answer cites as [1], [2].

Before searching a session it brings that session's index up to date (cheap
when nothing changed). With no passage found, the observation says so and asks
for no citation: nothing is invented.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from backend.storage.sessions import SessionKey
from backend.tools.rag.index import IndexingRefused, RagIndex, SearchMethod
from backend.tools.rag.store import Passage

MAX_QUERY_SHOWN = 200
MAX_PASSAGE_SHOWN = 1500

_METHODS: dict[SearchMethod, str] = {
    "bm25": "ranked by keywords (BM25)",
    "hybrid": "ranked by keywords (BM25) and embeddings",
}


@dataclass(frozen=True)
class RagResult:
    query: str
    passages: list[Passage]
    method: SearchMethod = "bm25"
    notes: list[str] = field(default_factory=list)

    @property
    def citations(self) -> list[dict[str, Any]]:
        """`{"n", "source", "page"}` per passage, `n` being the number the answer cites."""
        return [
            {"n": n, "source": passage.source, "page": passage.page}
            for n, passage in enumerate(self.passages, start=1)
        ]

    def as_observation(self) -> str:
        """The text the agent reads: `[1] (source: report.pdf, page 3) text…` per passage."""
        query = _shorten(self.query, MAX_QUERY_SHOWN)
        if not self.passages:
            lines = [
                f'No relevant passages were found in the uploaded documents for "{query}". '
                "Say that the documents do not cover it; do not invent sources or citations."
            ]
        else:
            method = _METHODS[self.method]
            lines = [f'Passages from the uploaded documents for "{query}", {method}:']
            for n, passage in enumerate(self.passages, start=1):
                text = _shorten(passage.text, MAX_PASSAGE_SHOWN)
                lines.append(f"[{n}] ({_where(passage)}) {text}")
            lines.append(
                "Cite the passages you use by their number, like [1]. "
                "If they do not answer the question, say so."
            )
        lines.extend(f"Note: {note}" for note in self.notes)
        return "\n".join(lines)


def _where(passage: Passage) -> str:
    where = f"source: {passage.source}"
    if passage.page is not None:
        return f"{where}, page {passage.page}"
    if passage.section:
        return f'{where}, section "{_shorten(passage.section, 80)}"'
    return where


def _shorten(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


async def rag_retrieval(
    query: str, *, user_id: int, session_id: SessionKey | None, index: RagIndex, k: int = 5
) -> RagResult:
    """The user's passages most relevant to `query` (this session's, when one is given)."""
    notes: list[str] = []
    if session_id is not None:
        try:
            outcomes = await index.index_session(user_id, session_id)
        except IndexingRefused as exc:  # the server's bound: search what is indexed
            outcomes = []
            notes.append(f"The documents could not be brought up to date now ({exc}); "
                         "the passages come from what was indexed before.")  # fmt: skip
        for outcome in outcomes:
            if outcome.status == "failed":
                notes.append(f"{outcome.source} could not be read ({outcome.error}).")
    retrieval = await index.retrieve(user_id, query, k, session_id)
    if retrieval.note:
        notes.append(retrieval.note)
    return RagResult(query, retrieval.passages, retrieval.method, notes)
