"""Cutting sections into passages of about 800-1200 characters.

Text is split into paragraphs (blank lines), paragraphs into sentences, and
sentences too long for a passage at a space. Passages are packed greedily from
these pieces: one ends before it would pass `MAX_CHARS`, or at a paragraph
break once it has `MIN_CHARS`. The next one starts with the previous one's last
sentences (up to `OVERLAP_CHARS`), so a fact cut in two is still found whole.
Sections are cut separately, so a passage never spans two PDF pages.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from backend.tools.rag.documents import Section

MIN_CHARS = 800
MAX_CHARS = 1200
OVERLAP_CHARS = 150

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+")


@dataclass(frozen=True)
class Chunk:
    """One passage of a document; `index` counts from 0 across the whole document."""

    text: str
    page: int | None
    section: str | None
    index: int


@dataclass(frozen=True)
class _Piece:
    text: str
    opens_paragraph: bool


def chunk_sections(sections: Iterable[Section]) -> list[Chunk]:
    chunks: list[Chunk] = []
    for section in sections:
        for text in split_passages(section.text):
            chunks.append(Chunk(text, section.page, section.heading, len(chunks)))
    return chunks


def split_passages(
    text: str,
    *,
    min_chars: int = MIN_CHARS,
    max_chars: int = MAX_CHARS,
    overlap: int = OVERLAP_CHARS,
) -> list[str]:
    """`text` as passages of at most `max_chars` characters."""
    passages: list[str] = []
    current: list[_Piece] = []
    for piece in _pieces(text, max(max_chars - overlap, max_chars // 2)):
        size = _length(current)
        full = size + 2 + len(piece.text) > max_chars
        if current and (full or (piece.opens_paragraph and size >= min_chars)):
            passages.append(_join(current))
            current = _tail(current, overlap)
            if _length(current) + 2 + len(piece.text) > max_chars:
                current = []
        current.append(piece)
    if current:
        passages.append(_join(current))
    return passages


def _pieces(text: str, max_chars: int) -> list[_Piece]:
    pieces: list[_Piece] = []
    for paragraph in _PARAGRAPH_BREAK.split(text):
        flat = " ".join(paragraph.split())
        if not flat:
            continue
        first = True
        for sentence in _SENTENCE_END.split(flat):
            for part in _hard_split(sentence, max_chars):
                pieces.append(_Piece(part, first))
                first = False
    return pieces


def _hard_split(sentence: str, max_chars: int) -> list[str]:
    """A sentence longer than a passage, cut at spaces (or anywhere if it has none)."""
    parts = []
    while len(sentence) > max_chars:
        cut = sentence.rfind(" ", 0, max_chars + 1)
        if cut < max_chars // 2:
            cut = max_chars
        parts.append(sentence[:cut].rstrip())
        sentence = sentence[cut:].lstrip()
    if sentence:
        parts.append(sentence)
    return parts


def _tail(pieces: list[_Piece], overlap: int) -> list[_Piece]:
    """The last sentences that fit in `overlap`, or the end of the last one cut at a word."""
    tail: list[_Piece] = []
    for piece in reversed(pieces):
        if _length(tail) + 2 + len(piece.text) > overlap:
            break
        tail.insert(0, piece)
    if tail or not pieces or overlap <= 0:
        return tail
    last = pieces[-1].text
    start = last.find(" ", len(last) - overlap)
    return [_Piece(last[start + 1 :], False)] if start >= 0 else []


def _length(pieces: list[_Piece]) -> int:
    return len(_join(pieces)) if pieces else 0


def _join(pieces: list[_Piece]) -> str:
    text = pieces[0].text
    for piece in pieces[1:]:
        text += ("\n\n" if piece.opens_paragraph else " ") + piece.text
    return text
