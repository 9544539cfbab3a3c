"""PDF and Word documents: page or paragraph counts and the opening text.

pypdf reads the cross-reference table and only the first pages' content
streams; a .docx is a zip, so it is checked for zip bombs before python-docx
parses it (with entity resolution off).
"""

from __future__ import annotations

from typing import Any

import docx
import pypdf

from backend.files.archive_checks import check_zip_container
from backend.files.model import FileMetadata, Source

TEXT_CHARS = 500
TEXT_PAGES = 3
FIRST_PARAGRAPHS = 5


def _squeeze(text: str) -> str:
    """Whitespace collapsed, cut to `TEXT_CHARS`."""
    flat = " ".join(text.split())
    return flat if len(flat) <= TEXT_CHARS else flat[: TEXT_CHARS - 1] + "…"


def describe_pdf(source: Source) -> FileMetadata:
    source.handle.seek(0)
    reader = pypdf.PdfReader(source.handle)
    if reader.is_encrypted and not reader.decrypt(""):
        raise ValueError("the PDF is password-protected")
    pages = len(reader.pages)
    parts: list[str] = []
    for page in reader.pages[:TEXT_PAGES]:
        parts.append(page.extract_text())
        if sum(map(len, parts)) >= TEXT_CHARS:
            break
    details: dict[str, Any] = {"pages": pages, "text": _squeeze("\n".join(parts))}
    info = reader.metadata
    if info is not None and info.title:
        details["title"] = str(info.title)[:200]
    note = "" if details["text"] else " (no extractable text)"
    return source.describe("document", f"PDF, {pages} page(s){note}", details)


def describe_docx(source: Source) -> FileMetadata:
    check_zip_container(source.handle, source.name)
    document = docx.Document(source.handle)
    paragraphs = [paragraph.text for paragraph in document.paragraphs if paragraph.text.strip()]
    first = paragraphs[:FIRST_PARAGRAPHS]
    details: dict[str, Any] = {
        "paragraphs": len(paragraphs),
        "tables": len(document.tables),
        "first_paragraphs": [_squeeze(text) for text in first],
        "text": _squeeze("\n".join(first)),
    }
    title = document.core_properties.title
    if title:
        details["title"] = title[:200]
    return source.describe(
        "document",
        f"Word document, {len(paragraphs)} paragraphs, {len(document.tables)} tables",
        details,
    )
