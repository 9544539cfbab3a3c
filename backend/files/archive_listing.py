"""Listing an archive's members without unpacking anything.

A zip lists from its central directory. An uncompressed tar is walked by
seeking from header to header; a compressed one has to be decompressed to find
its headers, so that walk stops after `LISTING_BUDGET` compressed bytes and says
the listing is partial. A lone .gz/.bz2 shows its content's first lines.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from typing import Any

from backend.files.archive_checks import (
    EXTRACT_LIMITS,
    ArchiveFormat,
    UnsafeArchive,
    archive_format,
    check_zip,
    decompressed,
)
from backend.files.model import FileMetadata, Source, human_size

MAX_ENTRIES = 200
LISTING_BUDGET = 64 * 1024 * 1024
PREVIEW_BYTES = 4096
PREVIEW_LINES = 5


class _OverBudget(Exception):
    pass


class _Budget(io.RawIOBase):
    """A read-only view of a handle that gives up after `budget` bytes."""

    def __init__(self, handle: Any, budget: int) -> None:
        self.handle = handle
        self.left = budget

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.left <= 0:
            raise _OverBudget
        data = self.handle.read(min(len(buffer), self.left))
        self.left -= len(data)
        buffer[: len(data)] = data
        return len(data)


def _entry(name: str, size: int, kind: str) -> dict[str, Any]:
    return {"name": name, "size": size, "type": kind}


def _listed(
    source: Source, fmt: str, entries: list[dict[str, Any]], count: int | None, total: int
) -> FileMetadata:
    files = sum(1 for entry in entries if entry["type"] == "file")
    counted = f"{count:,} entries" if count is not None else f"{len(entries)}+ entries (partial)"
    return source.describe(
        "archive",
        f"{fmt} archive, {counted}, {human_size(total)} unpacked"
        + ("" if count is not None else " so far"),
        {
            "format": fmt,
            "entries": entries[:MAX_ENTRIES],
            "entry_count": count,
            "file_count_listed": files,
            "total_bytes": total,
            "truncated": count is None or count > MAX_ENTRIES,
        },
    )


def _zip(source: Source) -> FileMetadata:
    source.handle.seek(0)
    with zipfile.ZipFile(source.handle) as archive:
        members = archive.infolist()
        warning = None
        try:
            check_zip(archive, EXTRACT_LIMITS, source.name)
        except UnsafeArchive as exc:
            warning = str(exc)
    entries = [
        _entry(info.filename, info.file_size, "dir" if info.is_dir() else "file")
        for info in members[:MAX_ENTRIES]
    ]
    metadata = _listed(source, "zip", entries, len(members), sum(i.file_size for i in members))
    if warning:
        metadata.details["warning"] = warning
    return metadata


def _tar_kind(info: tarfile.TarInfo) -> str:
    if info.isreg():
        return "file"
    if info.isdir():
        return "dir"
    return "link" if info.issym() or info.islnk() else "other"


def _open_tar(source: Source, compression: ArchiveFormat | None) -> tarfile.TarFile:
    """Seekable for a plain tar (headers are skipped to), a budgeted stream otherwise."""
    source.handle.seek(0)
    if compression is None:
        return tarfile.open(fileobj=source.handle, mode="r:")
    stream = _Budget(source.handle, LISTING_BUDGET)
    if compression == "gzip":
        return tarfile.open(fileobj=stream, mode="r|gz")
    return tarfile.open(fileobj=stream, mode="r|bz2")


def _tar(source: Source, compression: ArchiveFormat | None) -> FileMetadata:
    entries: list[dict[str, Any]] = []
    count: int | None = 0
    total = 0
    with _open_tar(source, compression) as archive:
        try:
            for info in archive:
                if len(entries) < MAX_ENTRIES:
                    entries.append(_entry(info.name, info.size, _tar_kind(info)))
                total += info.size
                count = (count or 0) + 1
        except _OverBudget:
            count = None
    fmt = {None: "tar", "gzip": "tar.gz", "bzip2": "tar.bz2"}[compression]
    return _listed(source, fmt, entries, count, total)


def _single(source: Source, fmt: ArchiveFormat) -> FileMetadata:
    """One compressed file: its name, its size where the format says, its first lines."""
    inner = source.name.rsplit("/", 1)[-1].removesuffix(".gz").removesuffix(".bz2")
    details: dict[str, Any] = {"format": fmt, "entries": [_entry(inner, -1, "file")]}
    if fmt == "gzip" and source.size >= 18:
        unpacked = int.from_bytes(source.read_at(source.size - 4, 4), "little")
        details["entries"] = [_entry(inner, unpacked, "file")]
        details["total_bytes"] = unpacked
    source.handle.seek(0)
    with decompressed(source.handle, fmt) as stream:
        head = stream.read(PREVIEW_BYTES)
    if b"\x00" not in head:
        text = head.decode("utf-8", errors="replace")
        details["first_lines"] = text.splitlines()[:PREVIEW_LINES]
    size = f", {human_size(details['total_bytes'])} unpacked" if "total_bytes" in details else ""
    return source.describe("archive", f"{fmt} file holding {inner}{size}", details)


def describe_archive(source: Source) -> FileMetadata:
    fmt = archive_format(source.read_at(0, 512))
    if fmt == "zip":
        return _zip(source)
    if fmt in ("gzip", "bzip2"):
        source.handle.seek(0)
        with decompressed(source.handle, fmt) as stream:
            inner = archive_format(stream.read(512))
        return _tar(source, fmt) if inner == "tar" else _single(source, fmt)
    if fmt == "tar":
        return _tar(source, None)
    raise ValueError("not a zip, tar, gzip or bzip2 archive")
