"""PDF and Word documents: counts and opening text."""

from __future__ import annotations

from pathlib import Path

import docx
import pypdf

from tests.files.helpers import describe, write_pdf, zip_bomb_bytes


def test_a_pdf_gives_pages_and_opening_text(tmp_path: Path) -> None:
    path = tmp_path / "report.pdf"
    write_pdf(path, ["Quarterly revenue report", "Second page"])
    metadata = describe(path)
    assert (metadata.kind, metadata.error) == ("document", None)
    assert metadata.details["pages"] == 2
    assert metadata.details["text"].startswith("Quarterly revenue report")
    assert metadata.summary == "PDF, 2 page(s)"


def test_a_password_protected_pdf_is_an_error(tmp_path: Path) -> None:
    writer = pypdf.PdfWriter()
    writer.add_blank_page(100, 100)
    writer.encrypt("secret", algorithm="RC4-128")
    path = tmp_path / "locked.pdf"
    with path.open("wb") as handle:
        writer.write(handle)
    error = describe(path).error
    assert error is not None and "password" in error


def test_a_docx_gives_paragraphs_tables_and_text(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_heading("Churn analysis", level=1)
    document.add_paragraph("Customers who left in 2024.")
    document.add_table(rows=2, cols=2)
    path = tmp_path / "notes.docx"
    document.save(str(path))
    metadata = describe(path)
    assert (metadata.kind, metadata.error) == ("document", None)
    assert (metadata.details["paragraphs"], metadata.details["tables"]) == (2, 1)
    assert metadata.details["first_paragraphs"] == ["Churn analysis", "Customers who left in 2024."]


def test_a_zip_bomb_posing_as_docx_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.docx"
    path.write_bytes(zip_bomb_bytes("word/document.xml"))
    error = describe(path).error
    assert error is not None and "zip bomb" in error
