"""What makes an archive acceptable: its format, the limits, member names.

Shared by `safe_extract`, the archive listing and the xlsx/docx readers (both
are zips, checked for zip bombs before a library unpacks them).
"""

from __future__ import annotations

import bz2
import gzip
import zipfile
from dataclasses import dataclass
from typing import BinaryIO, Literal

from backend.storage.workspaces import UnsafePath, safe_relative

ArchiveFormat = Literal["zip", "tar", "gzip", "bzip2"]


class UnsafeArchive(Exception):
    """The archive is refused (unsafe, too big or damaged); the message says why."""


@dataclass(frozen=True)
class ArchiveLimits:
    max_members: int = 10_000
    max_total_bytes: int = 2 * 1024**3
    max_ratio: float = 200.0
    ratio_floor: int = 1024 * 1024
    """Members (or archives) smaller than this uncompressed may compress as well as they like."""


EXTRACT_LIMITS = ArchiveLimits()
DOCUMENT_LIMITS = ArchiveLimits(max_members=20_000, max_total_bytes=1024**3)


def archive_format(head: bytes) -> ArchiveFormat | None:
    """The container format from a file's first 512 bytes."""
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return "zip"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"BZh"):
        return "bzip2"
    if head[257:262] == b"ustar":
        return "tar"
    return None


def decompressed(source: BinaryIO, fmt: ArchiveFormat) -> gzip.GzipFile | bz2.BZ2File:
    """A reader of a .gz or .bz2 stream's content."""
    if fmt == "gzip":
        return gzip.GzipFile(fileobj=source, mode="rb")
    return bz2.BZ2File(source, mode="rb")


def too_compressed(size: int, compressed: int, limits: ArchiveLimits) -> bool:
    return size > limits.ratio_floor and size > limits.max_ratio * max(compressed, 1)


def check_zip(archive: zipfile.ZipFile, limits: ArchiveLimits, label: str) -> list[zipfile.ZipInfo]:
    """The members, if their count, total size and ratios are within `limits`."""
    members = archive.infolist()
    if len(members) > limits.max_members:
        raise UnsafeArchive(f"{label} has {len(members):,} members (limit {limits.max_members:,})")
    total = sum(member.file_size for member in members)
    if total > limits.max_total_bytes:
        raise UnsafeArchive(
            f"{label} would unpack to {total:,} bytes (limit {limits.max_total_bytes:,})"
        )
    for member in members:
        if too_compressed(member.file_size, member.compress_size, limits):
            raise UnsafeArchive(
                f"{label}: {member.filename} is compressed more than "
                f"{limits.max_ratio:.0f}:1, which looks like a zip bomb"
            )
    return members


def check_zip_container(handle: BinaryIO, label: str) -> None:
    """Refuse an xlsx/docx (a zip) whose members would unpack like a zip bomb."""
    handle.seek(0)
    with zipfile.ZipFile(handle) as archive:
        check_zip(archive, DOCUMENT_LIMITS, label)
    handle.seek(0)


def member_parts(name: str, label: str) -> tuple[str, ...]:
    """A member's path as safe relative parts ('./' dropped), or `UnsafeArchive`."""
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchive(f"{label}: member {name!r} has an absolute path")
    parts = [part for part in name.rstrip("/").split("/") if part not in ("", ".")]
    try:
        return safe_relative("/".join(parts)).parts
    except UnsafePath:
        raise UnsafeArchive(f"{label}: member {name!r} points outside the archive") from None
