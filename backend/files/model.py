"""What we know about one workspace file: `FileMetadata`, its kinds and errors.

Metadata goes into prompts and API replies, so everything in it is plain JSON (the
readers make sample rows' cells so: `cells.py`). No reader's library is imported here:
the server holds metadata, and only the isolated helper reads files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any, BinaryIO, Literal

FileKind = Literal["tabular", "document", "image", "archive", "data", "text"]


class UnsupportedFileType(Exception):
    """The file's extension is not one the tools understand."""

    def __init__(self, name: str, extension: str) -> None:
        shown = f".{extension}" if extension else "no extension"
        super().__init__(f"{name}: files with {shown} are not supported")
        self.name = name
        self.extension = extension


# A table file over this does not fit a run's memory once in pandas (PYTHON_CODE_MAX_MEMORY
# is 512 MB by default, and a CSV takes several times its size as a DataFrame).
LARGE_FILE_BYTES = 100 * 1024 * 1024


@dataclass
class FileMetadata:
    """One file's description; `details` holds the kind-specific facts.

    Conventions in `details`: tabular files have `columns` (a list of
    `{"name", "dtype"}`), `rows` (an int or None), `rows_estimated` and
    `sample_rows` (lists of JSON values); spreadsheets add `sheets`, JSON adds
    `keys`, documents `text`, archives `entries`.
    """

    name: str
    extension: str
    size: int
    kind: FileKind
    summary: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def large(self) -> bool:
        """A table to query with DuckDB, never to load into pandas."""
        return self.kind == "tabular" and self.size > LARGE_FILE_BYTES

    @property
    def column_names(self) -> list[str]:
        return [str(column["name"]) for column in self.details.get("columns", [])]


def file_extension(name: str) -> str:
    return PurePosixPath(name).suffix.lower().removeprefix(".")


def human_size(size: int) -> str:
    amount = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if amount < 1024 or unit == "GB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} GB"


@dataclass(frozen=True)
class Source:
    """An open file to describe: every format reader takes one."""

    name: str
    handle: BinaryIO
    size: int
    extension: str

    def describe(
        self, kind: FileKind, summary: str, details: dict[str, Any] | None = None
    ) -> FileMetadata:
        return FileMetadata(self.name, self.extension, self.size, kind, summary, details or {})

    def read_at(self, offset: int, length: int) -> bytes:
        self.handle.seek(offset)
        return self.handle.read(length)


def estimate_count(size: int, sample_bytes: int, sample_count: int) -> int:
    """How many rows/lines a file of `size` holds if it continues like its sample."""
    if sample_bytes <= 0 or sample_count <= 0:
        return 0
    return round(size * sample_count / sample_bytes)
