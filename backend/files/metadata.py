"""`extract_file_metadata`: one file's description, dispatched by extension.

Every reader works from a bounded sample, a header or a footer, so the time
taken does not grow with the file. Whatever goes wrong inside a reader (a
damaged file, a zip bomb, a password) comes back as metadata with `error` set,
never as an exception; only an unknown extension raises `UnsupportedFileType`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import BinaryIO

from backend.files.archive_listing import describe_archive
from backend.files.columnar import describe_feather, describe_parquet
from backend.files.databases import DATABASE_EXTENSIONS, describe_database
from backend.files.delimited import describe_delimited
from backend.files.documents import describe_docx, describe_pdf
from backend.files.images import describe_image
from backend.files.model import (
    FileKind,
    FileMetadata,
    Source,
    UnsupportedFileType,
    file_extension,
)
from backend.files.scientific import (
    describe_binary,
    describe_hdf5,
    describe_netcdf,
)
from backend.files.spreadsheets import describe_xls, describe_xlsx
from backend.files.structured import (
    describe_json,
    describe_jsonl,
    describe_xml,
    describe_yaml,
)
from backend.files.text import describe_text, looks_binary

logger = logging.getLogger(__name__)

Reader = Callable[[Source], FileMetadata]
_HANDLE_REPR = re.compile(r"<[^<>]*(?: at 0x[0-9a-fA-F]+| name=[^<>]*)>")


def _text(source: Source) -> FileMetadata:
    if looks_binary(source):
        raise ValueError("it holds binary data, not text")
    return describe_text(source)


def _table_or_text(source: Source) -> FileMetadata:
    """A .csv/.tsv/.txt: a table if it looks delimited, else plain text."""
    if looks_binary(source):
        raise ValueError("it holds binary data, not text")
    return describe_delimited(source) or describe_text(source)


def _dat(source: Source) -> FileMetadata:
    """A .dat: a delimited table, plain text or raw binary."""
    return describe_binary(source) if looks_binary(source) else _table_or_text(source)


READERS: dict[str, tuple[FileKind, Reader]] = {
    "csv": ("tabular", _table_or_text),
    "tsv": ("tabular", _table_or_text),
    "txt": ("text", _table_or_text),
    "dat": ("data", _dat),
    "md": ("text", _text),
    "log": ("text", _text),
    "html": ("text", _text),
    "htm": ("text", _text),
    "sql": ("text", _text),
    "json": ("data", describe_json),
    "jsonl": ("tabular", describe_jsonl),
    "yaml": ("data", describe_yaml),
    "yml": ("data", describe_yaml),
    "xml": ("data", describe_xml),
    "xlsx": ("tabular", describe_xlsx),
    "xlsm": ("tabular", describe_xlsx),
    "xls": ("tabular", describe_xls),
    "parquet": ("tabular", describe_parquet),
    "feather": ("tabular", describe_feather),
    "pdf": ("document", describe_pdf),
    "docx": ("document", describe_docx),
    "h5": ("data", describe_hdf5),
    "hdf5": ("data", describe_hdf5),
    "nc": ("data", describe_netcdf),
    **dict.fromkeys(
        ("png", "jpg", "jpeg", "gif", "bmp", "tif", "tiff", "webp"),
        ("image", describe_image),
    ),
    **dict.fromkeys(("zip", "tar", "gz", "tgz", "bz2"), ("archive", describe_archive)),
    **dict.fromkeys(DATABASE_EXTENSIONS, ("data", describe_database)),
}


def _human_error(source: Source, exc: Exception) -> str:
    """One line for the user; library messages can name the handle or its path."""
    detail = (str(exc).strip().splitlines() or [""])[0]
    detail = _HANDLE_REPR.sub("the file", detail)
    handle_name = getattr(source.handle, "name", None)
    if isinstance(handle_name, str) and handle_name:
        detail = detail.replace(handle_name, "the file")
    return f"Could not read this .{source.extension} file: {detail[:200] or type(exc).__name__}"


def extract_file_metadata(name: str, handle: BinaryIO, size: int) -> FileMetadata:
    """Describe the file `name` (workspace-relative) open as `handle`, of `size` bytes.

    Raises `UnsupportedFileType` for an unknown extension; any other failure is
    reported in the result's `error`.
    """
    extension = file_extension(name)
    if extension not in READERS:
        raise UnsupportedFileType(name, extension)
    kind, reader = READERS[extension]
    source = Source(name, handle, size, extension)
    try:
        return reader(source)
    except Exception as exc:  # every reader failure becomes metadata, by contract
        logger.info("metadata of %s failed", name, exc_info=True)
        error = _human_error(source, exc)
        return FileMetadata(name, extension, size, kind, error, error=error)
