"""RAG retrieval with citations: numbered passages with source and page, or an honest nothing."""

from __future__ import annotations

from pathlib import Path

from backend.tools.rag import Passage, RagIndex, RagResult, rag_retrieval
from tests.tools.rag.conftest import Upload
from tests.tools.rag.samples import pdf_bytes

SESSION = "u1-session-t"


async def test_rag_retrieval_with_citations(
    index: RagIndex, upload: Upload, tmp_path: Path
) -> None:
    upload(
        SESSION,
        "report.pdf",
        pdf_bytes(tmp_path, ["Annual report", "Revenue grew 12 percent to 4.2 million in 2023"]),
    )
    upload(SESSION, "notes.md", "# Revenue\n\nRevenue targets for 2024 are not set yet.\n")
    # No indexing beforehand: the tool brings the session's index up to date itself.
    result = await rag_retrieval(
        "What was the revenue in 2023?", user_id=7, session_id=SESSION, index=index
    )

    assert result.citations == [
        {"n": 1, "source": "uploads/report.pdf", "page": 2},
        {"n": 2, "source": "uploads/notes.md", "page": None},
    ]
    lines = result.as_observation().splitlines()
    assert lines[0] == (
        'Passages from the uploaded documents for "What was the revenue in 2023?", '
        "ranked by keywords (BM25):"
    )
    assert lines[1] == (
        "[1] (source: uploads/report.pdf, page 2) Revenue grew 12 percent to 4.2 million in 2023"
    )
    assert lines[2] == (
        '[2] (source: uploads/notes.md, section "Revenue") '
        "# Revenue Revenue targets for 2024 are not set yet."
    )
    assert lines[3].startswith("Cite the passages you use by their number, like [1].")
    assert len(lines) == 4


async def test_nothing_found_says_so_and_cites_nothing(index: RagIndex, upload: Upload) -> None:
    upload(SESSION, "notes.txt", "Only about tapirs.")
    result = await rag_retrieval(
        "quantum chromodynamics", user_id=7, session_id=SESSION, index=index
    )
    assert result.passages == [] and result.citations == []
    assert result.as_observation() == (
        'No relevant passages were found in the uploaded documents for "quantum chromodynamics". '
        "Say that the documents do not cover it; do not invent sources or citations."
    )
    empty = await rag_retrieval("?!", user_id=7, session_id=SESSION, index=index)
    assert empty.citations == [] and empty.as_observation().startswith("No relevant passages")


async def test_unreadable_documents_and_other_sessions_are_noted(
    index: RagIndex, upload: Upload
) -> None:
    upload("u7-older", "old.txt", "Tapirs again, from last week.")
    await index.index_session(7, "u7-older")
    upload(SESSION, "broken.pdf", b"%PDF-1.4 not really")
    upload(SESSION, "notes.txt", "Tapirs eat leaves.")
    here = await rag_retrieval("tapirs", user_id=7, session_id=SESSION, index=index)
    assert [c["source"] for c in here.citations] == ["uploads/notes.txt"]
    assert "Note: uploads/broken.pdf could not be read" in here.as_observation()
    everywhere = await rag_retrieval("tapirs", user_id=7, session_id=None, index=index, k=10)
    assert sorted(p.session_id for p in everywhere.passages) == ["u1-session-t", "u7-older"]


def test_long_passages_are_shortened_in_the_observation() -> None:
    passage = Passage(1, "s", "uploads/a.txt", None, None, 0, "word " * 400)
    observation = RagResult("q", [passage], "hybrid", ["keep in mind"]).as_observation()
    lines = observation.splitlines()
    assert lines[0].endswith("ranked by keywords (BM25) and embeddings:")
    assert lines[1].startswith("[1] (source: uploads/a.txt) word word") and lines[1].endswith("…")
    assert len(lines[1]) < 1600
    assert lines[-1] == "Note: keep in mind"
