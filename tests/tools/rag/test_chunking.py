"""Passages of about 800-1200 characters, cut at paragraphs and sentences, overlapping a little."""

from __future__ import annotations

import itertools

from backend.tools.rag import Section, chunk_sections, split_passages
from backend.tools.rag.chunking import MAX_CHARS, MIN_CHARS, OVERLAP_CHARS


def _paragraph(n: int, sentences: int = 6) -> str:
    return " ".join(f"Paragraph {n} sentence {s} says something useful." for s in range(sentences))


def test_short_text_is_one_passage_with_whitespace_collapsed() -> None:
    assert split_passages("  Hello\n world.  \n\n\n Second   paragraph. ") == [
        "Hello world.\n\nSecond paragraph."
    ]
    assert split_passages(" \n\n ") == []


def test_passages_are_sized_and_end_at_sentences() -> None:
    text = "\n\n".join(_paragraph(n) for n in range(20))
    passages = split_passages(text)
    assert len(passages) > 5
    for passage in passages[:-1]:
        assert MIN_CHARS <= len(passage) <= MAX_CHARS
        assert passage.endswith(".")
    # every sentence survives
    for n in range(20):
        assert any(f"Paragraph {n} sentence 5 says" in passage for passage in passages)


def test_passages_prefer_paragraph_breaks_and_overlap() -> None:
    text = "\n\n".join(_paragraph(n) for n in range(20))
    passages = split_passages(text)
    # once a passage has MIN_CHARS it ends at a paragraph break...
    assert sum(p.rstrip().endswith("sentence 5 says something useful.") for p in passages) >= 3
    # ...and the next one opens with the last sentence(s) of the previous one
    for first, second in itertools.pairwise(passages):
        last_sentence = first.rsplit(". ", 1)[-1].split("\n\n")[-1]
        assert last_sentence in second[: OVERLAP_CHARS + 2]
        assert first.endswith(second[: second.index(last_sentence) + len(last_sentence)])


def test_long_sentences_and_unbroken_text_are_cut() -> None:
    words = ("word " * 1000).strip()
    passages = split_passages(words)
    assert all(len(p) <= MAX_CHARS for p in passages)
    assert len(" ".join(passages)) >= len(words)
    blob = "x" * 5000
    pieces = split_passages(blob)
    assert all(len(p) <= MAX_CHARS for p in pieces) and "".join(pieces) == blob


def test_chunks_keep_page_heading_and_a_running_index() -> None:
    sections = [
        Section(_paragraph(1, 30), page=1),
        Section("Short page two.", page=2),
        Section("Under a heading.", heading="Install"),
    ]
    chunks = chunk_sections(sections)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert {c.page for c in chunks[:-2]} == {1}
    assert (chunks[-2].page, chunks[-2].text) == (2, "Short page two.")
    assert (chunks[-1].page, chunks[-1].section) == (None, "Install")
