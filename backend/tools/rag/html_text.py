"""HTML to text with the standard library's parser: no network, no external entities.

Character references are decoded by `html.unescape` (the parser's
`convert_charrefs`); scripts, styles and templates are dropped; block elements
become paragraph breaks and each h1-h6 starts a new section named after it.
"""

from __future__ import annotations

from html.parser import HTMLParser

_SKIPPED = frozenset({"script", "style", "noscript", "template", "svg", "math"})
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_BLOCKS = frozenset(
    {
        "p",
        "div",
        "section",
        "article",
        "main",
        "header",
        "footer",
        "aside",
        "nav",
        "li",
        "ul",
        "ol",
        "dl",
        "dt",
        "dd",
        "tr",
        "table",
        "blockquote",
        "pre",
        "figure",
        "figcaption",
        "title",
        "hr",
    }
)
MAX_HEADING_CHARS = 200


class _TextCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[tuple[str | None, str]] = []
        self._heading: str | None = None
        self._parts: list[str] = []
        self._skipping = 0
        self._heading_parts: list[str] | None = None
        self._cells = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIPPED:
            self._skipping += 1
        elif tag in _HEADINGS:
            self._flush()
            self._heading_parts = []
        elif tag in _BLOCKS:
            self._parts.append("\n\n")
            self._cells = 0
        elif tag == "br":
            self._parts.append("\n")
        elif tag in ("td", "th"):
            self._parts.append(" | " if self._cells else "")
            self._cells += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skipping = max(0, self._skipping - 1)
        elif tag in _HEADINGS and self._heading_parts is not None:
            heading = " ".join("".join(self._heading_parts).split())
            self._heading_parts = None
            self._heading = heading[:MAX_HEADING_CHARS] or self._heading
            self._parts.append(heading + "\n\n")
        elif tag in _BLOCKS:
            self._parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self._skipping:
            return
        if self._heading_parts is not None:
            self._heading_parts.append(data)
        else:
            self._parts.append(data)

    def _flush(self) -> None:
        text = "".join(self._parts)
        if text.strip():
            self.sections.append((self._heading, text))
        self._parts = []

    def close(self) -> None:
        super().close()
        if self._heading_parts is not None:  # an unclosed heading: keep its text
            self._parts.extend(self._heading_parts)
            self._heading_parts = None
        self._flush()


def html_sections(markup: str) -> list[tuple[str | None, str]]:
    """(heading, text) pairs in document order; text before any heading has None."""
    collector = _TextCollector()
    collector.feed(markup)
    collector.close()
    return collector.sections
