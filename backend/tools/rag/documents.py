"""The text of an uploaded document, as sections: a PDF page, or a heading's part.

`read_sections` opens the workspace file without following links and is a
module-level function, so `RagIndex` can run it in the isolated helper process
(`backend/files/isolation.py`): PDF, Word and HTML parsing of untrusted
files happens there, time- and memory-limited. Every reader is bounded: text is
read up to `MAX_TEXT_BYTES`, a document yields at most `MAX_DOCUMENT_CHARS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from backend.files.archive_checks import check_zip_container
from backend.files.model import Source
from backend.files.text import looks_binary, read_sample
from backend.storage.sessions import SessionKey

if TYPE_CHECKING:
    from docx.table import Table
from backend.storage.workspaces import Workspaces
from backend.tools.rag.html_text import html_sections

RAG_EXTENSIONS = frozenset({"txt", "md", "pdf", "docx", "html", "htm"})
ISOLATED_EXTENSIONS = frozenset({"pdf", "docx", "html", "htm"})
"""Parsed in the helper process: native or third-party parsers of untrusted input."""

MAX_TEXT_BYTES = 16 * 1024 * 1024
MAX_DOCUMENT_CHARS = 4_000_000
MAX_PDF_PAGES = 2_000
MAX_HEADING_CHARS = 200

_MD_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)[ \t#]*$")
_MD_FENCE = re.compile(r"^ {0,3}(```|~~~)")


class UnsupportedDocument(ValueError):
    """The file's extension is not one of `RAG_EXTENSIONS`."""


class UnreadableDocument(ValueError):
    """The document is damaged, encrypted or not text; the message says why."""


@dataclass(frozen=True)
class Section:
    """A run of text with where it comes from: a PDF page or the heading above it."""

    text: str
    page: int | None = None
    heading: str | None = None


def extension_of(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""


def read_sections(data_dir: str, session_id: SessionKey, path: str) -> list[Section]:
    """`path`'s sections, opened through `Workspaces` (no link is followed)."""
    with Workspaces(Path(data_dir)).open_file(session_id, path) as handle:
        return sections_from(path, handle)


SectionRow = tuple[str, "int | None", "str | None"]


def section_rows(handle: BinaryIO, name: str) -> list[SectionRow]:
    """`sections_from` as plain data, for the isolated reader (`IsolatedRunner` takes only
    plain data back); a document's own failure is a ValueError that keeps its message."""
    try:
        return [(s.text, s.page, s.heading) for s in sections_from(name, handle)]
    except MemoryError:
        raise
    except Exception as exc:  # a damaged document can make a parser raise anything
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


def sections_from(name: str, handle: BinaryIO) -> list[Section]:
    """The non-empty sections of a document, cut at `MAX_DOCUMENT_CHARS`."""
    extension = extension_of(name)
    reader = _READERS.get(extension)
    if reader is None:
        raise UnsupportedDocument(f"{name}: .{extension} documents are not indexed")
    sections, total = [], 0
    for section in reader(name, handle):
        if not section.text.strip():
            continue
        if total + len(section.text) > MAX_DOCUMENT_CHARS:
            sections.append(_replace_text(section, section.text[: MAX_DOCUMENT_CHARS - total]))
            break
        sections.append(section)
        total += len(section.text)
    return sections


def _replace_text(section: Section, text: str) -> Section:
    return Section(text, section.page, section.heading)


def _decoded(name: str, handle: BinaryIO) -> str:
    """The text of a .txt/.md/.html, decoded like every other text reader does."""
    size = handle.seek(0, 2)
    source = Source(name, handle, size, extension_of(name))
    if looks_binary(source):
        raise UnreadableDocument(f"{name} holds binary data, not text")
    return read_sample(source, MAX_TEXT_BYTES).text


def _plain_sections(name: str, handle: BinaryIO) -> list[Section]:
    return [Section(_decoded(name, handle))]


def _markdown_sections(name: str, handle: BinaryIO) -> list[Section]:
    """One section per ATX heading (`# Title`); headings inside code fences don't count."""
    sections: list[Section] = []
    heading: str | None = None
    lines: list[str] = []
    fenced = False
    for line in _decoded(name, handle).splitlines():
        if _MD_FENCE.match(line):
            fenced = not fenced
        match = None if fenced else _MD_HEADING.match(line)
        if match:
            sections.append(Section("\n".join(lines), heading=heading))
            heading, lines = match.group(1).strip()[:MAX_HEADING_CHARS], []
        lines.append(line)  # the heading line stays searchable
    sections.append(Section("\n".join(lines), heading=heading))
    return sections


def _html_sections(name: str, handle: BinaryIO) -> list[Section]:
    return [
        Section(text, heading=heading) for heading, text in html_sections(_decoded(name, handle))
    ]


def _pdf_sections(name: str, handle: BinaryIO) -> list[Section]:
    """One section per page, numbered from 1."""
    import pypdf  # here, not at the top: documents are read in the isolated helper only

    handle.seek(0)
    reader = pypdf.PdfReader(handle)
    if reader.is_encrypted and not reader.decrypt(""):
        raise UnreadableDocument(f"{name} is password-protected")
    sections: list[Section] = []
    total = 0
    for number, page in enumerate(reader.pages, start=1):
        if number > MAX_PDF_PAGES or total > MAX_DOCUMENT_CHARS:
            break
        text = page.extract_text()
        total += len(text)
        sections.append(Section(text, page=number))
    return sections


def _docx_sections(name: str, handle: BinaryIO) -> list[Section]:
    """Paragraphs and tables in document order, one section per heading."""
    import docx  # as pypdf above
    from docx.text.paragraph import Paragraph

    check_zip_container(handle, name)
    document = docx.Document(handle)
    sections: list[Section] = []
    heading: str | None = None
    parts: list[str] = []
    for block in document.iter_inner_content():
        if isinstance(block, Paragraph):
            text = block.text.strip()
            style = block.style.name if block.style is not None else ""
            if text and (style or "").startswith(("Heading", "Title")):
                sections.append(Section("\n\n".join(parts), heading=heading))
                heading, parts = text[:MAX_HEADING_CHARS], []
            if text:
                parts.append(text)
        else:
            parts.append(_table_text(block))
    sections.append(Section("\n\n".join(parts), heading=heading))
    return sections


def _table_text(table: Table) -> str:
    """A table as lines of `cell | cell`, merged cells written once."""
    lines = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = " ".join(cell.text.split())
            if text and (not cells or cells[-1] != text):
                cells.append(text)
        if cells:
            lines.append(" | ".join(cells))
    return "\n".join(lines)


_READERS: dict[str, Callable[[str, BinaryIO], list[Section]]] = {
    "txt": _plain_sections,
    "md": _markdown_sections,
    "html": _html_sections,
    "htm": _html_sections,
    "pdf": _pdf_sections,
    "docx": _docx_sections,
}
