"""Text, headings and pages from txt, md, html, pdf and docx; damaged files are refused."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from backend.files.archive_checks import UnsafeArchive
from backend.tools.rag import Section, UnreadableDocument, UnsupportedDocument
from backend.tools.rag.documents import sections_from
from tests.files.helpers import zip_bomb_bytes
from tests.tools.rag.samples import docx_bytes, pdf_bytes


def _read(name: str, data: bytes) -> list[Section]:
    return sections_from(name, io.BytesIO(data))


def test_text_is_decoded_with_its_bom() -> None:
    assert _read("a.txt", "héllo".encode("utf-16")) == [Section("héllo")]
    assert _read("a.txt", "\ufeffplain".encode()) == [Section("plain")]
    with pytest.raises(UnreadableDocument, match="binary"):
        _read("a.txt", b"\x00\x01\x02")


def test_markdown_sections_follow_headings_outside_code_fences() -> None:
    text = "Intro line.\n\n# Install\nRun it.\n```\n# not a heading\n```\n## Use ##\nCall it.\n"
    sections = _read("guide.md", text.encode())
    assert [s.heading for s in sections] == [None, "Install", "Use"]
    assert "# not a heading" in sections[1].text
    assert sections[2].text.startswith("## Use")


def test_html_drops_scripts_and_markup_and_names_sections() -> None:
    markup = (
        "<html><head><title>Page</title><style>p {color: red}</style></head><body>"
        "<p>Before &amp; after</p><script>steal()</script>"
        "<h2>Prices</h2><table><tr><th>item</th><th>cost</th></tr>"
        "<tr><td>tea</td><td>3 &euro;</td></tr></table><!-- hidden --></body></html>"
    )
    sections = _read("page.html", markup.encode())
    assert [s.heading for s in sections] == [None, "Prices"]
    everything = " ".join(" ".join(s.text.split()) for s in sections)
    assert "Before & after" in everything and "item | cost" in everything
    assert "tea | 3 €" in everything
    assert "steal" not in everything and "color" not in everything and "hidden" not in everything


def test_pdf_pages_are_numbered_from_one(tmp_path: Path) -> None:
    sections = _read("r.pdf", pdf_bytes(tmp_path, ["first page words", "second page words"]))
    assert [s.page for s in sections] == [1, 2]
    assert "second page" in sections[1].text


def test_docx_keeps_document_order_headings_and_tables() -> None:
    data = docx_bytes(
        [("body", "Preface text."), ("heading", "Results"), ("body", "It worked.")],
        table=[["metric", "value"], ["accuracy", "0.93"]],
    )
    sections = _read("r.docx", data)
    assert [s.heading for s in sections] == [None, "Results"]
    assert sections[1].text == "Results\n\nIt worked.\n\nmetric | value\naccuracy | 0.93"


def test_a_docx_zip_bomb_and_unknown_types_are_refused() -> None:
    with pytest.raises(UnsafeArchive, match="zip bomb"):
        _read("bomb.docx", zip_bomb_bytes("word/document.xml", 5))
    with pytest.raises(UnsupportedDocument):
        _read("data.csv", b"a,b\n")
