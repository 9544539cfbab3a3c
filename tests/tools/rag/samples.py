"""Documents to index: Word files with headings and tables, PDFs with pages."""

from __future__ import annotations

import io
from pathlib import Path

import docx

from tests.files.helpers import write_pdf


def docx_bytes(blocks: list[tuple[str, str]], table: list[list[str]] | None = None) -> bytes:
    """A .docx of (style, text) paragraphs ("heading" or "body"), then an optional table."""
    document = docx.Document()
    for style, text in blocks:
        if style == "heading":
            document.add_heading(text, level=1)
        else:
            document.add_paragraph(text)
    if table:
        grid = document.add_table(rows=len(table), cols=len(table[0]))
        for row, values in zip(grid.rows, table, strict=True):
            for cell, value in zip(row.cells, values, strict=True):
                cell.text = value
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def pdf_bytes(tmp_path: Path, pages: list[str]) -> bytes:
    path = tmp_path / "generated.pdf"
    write_pdf(path, pages)
    return path.read_bytes()


def filler(topic: str, sentences: int) -> str:
    """Sentences about `topic` that share no rare words with other topics."""
    return " ".join(
        f"Paragraph sentence {n} keeps talking about {topic} in plain words."
        for n in range(sentences)
    )
