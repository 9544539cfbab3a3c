"""Text files: a bounded, decoded sample and the first lines.

Every text-based reader (delimited tables, JSON lines, YAML, XML, logs) starts
from `read_sample`, so no file is read past `SAMPLE_BYTES` however large it is.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from backend.files.model import FileMetadata, Source, estimate_count

SAMPLE_BYTES = 1024 * 1024
FIRST_LINES = 10
MAX_LINE_CHARS = 200


@dataclass(frozen=True)
class TextSample:
    """The start of a file, cut at a line end unless it is the whole file."""

    text: str
    encoding: str
    byte_count: int
    complete: bool

    def lines(self, limit: int) -> list[str]:
        """The first `limit` lines, each cut to `MAX_LINE_CHARS`."""
        head = self.text[: limit * (MAX_LINE_CHARS + 1) * 4]
        return [line[:MAX_LINE_CHARS] for line in head.splitlines()[:limit]]

    def line_count(self) -> int:
        return self.text.count("\n") + (0 if self.text.endswith("\n") or not self.text else 1)


def read_sample(source: Source, limit: int = SAMPLE_BYTES) -> TextSample:
    raw = source.read_at(0, limit + 1)
    complete = len(raw) <= limit
    raw = raw[:limit]
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return _utf16_sample(raw, complete)
    if not complete and (cut := raw.rfind(b"\n")) > 0:
        raw = raw[: cut + 1]
    encoding = "utf-8-sig" if raw.startswith(codecs.BOM_UTF8) else "utf-8"
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError:
        encoding, text = "latin-1", raw.decode("latin-1")
    return TextSample(text, encoding, len(raw), complete)


def _utf16_sample(raw: bytes, complete: bool) -> TextSample:
    text = raw[: len(raw) // 2 * 2].decode("utf-16", errors="replace")
    if not complete and (cut := text.rfind("\n")) > 0:
        text = text[: cut + 1]
    return TextSample(text, "utf-16", 2 + 2 * len(text), complete)


def looks_binary(source: Source) -> bool:
    head = source.read_at(0, 8192)
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return False
    return b"\x00" in head


def line_total(source: Source, sample: TextSample) -> tuple[int, bool]:
    """The file's line count and whether it is estimated from the sample."""
    if sample.complete:
        return sample.line_count(), False
    return estimate_count(source.size, sample.byte_count, sample.line_count()), True


def describe_text(source: Source) -> FileMetadata:
    """Line count (estimated past the sample) and the first lines."""
    sample = read_sample(source)
    lines, estimated = line_total(source, sample)
    approx = "~" if estimated else ""
    return source.describe(
        "text",
        f"{source.extension} text, {approx}{lines:,} lines",
        {
            "lines": lines,
            "lines_estimated": estimated,
            "encoding": sample.encoding,
            "first_lines": sample.lines(FIRST_LINES),
        },
    )
