"""`safe_extract`: unpacking an archive without letting it escape or explode.

Archives come from users and from sandboxed code, so every one is hostile until
checked. Before anything is written, the whole member list is checked: no
absolute paths or `..`, no links, devices or FIFOs, and caps on the member count,
the total uncompressed size and the compression ratio (see `archive_checks`).
Writing then goes through directory descriptors with O_NOFOLLOW|O_EXCL, counting
the bytes actually decompressed (a header can lie about sizes). On any failure
what was written is removed and `UnsafeArchive` says why in one human line.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Protocol

from backend.files.archive_checks import (
    EXTRACT_LIMITS,
    ArchiveFormat,
    ArchiveLimits,
    UnsafeArchive,
    archive_format,
    check_zip,
    decompressed,
    member_parts,
    too_compressed,
)

CHUNK = 1024 * 1024
# What damaged or exotic archives raise from zipfile, tarfile, gzip and bz2.
_DAMAGED = (
    OSError,
    EOFError,
    ValueError,
    NotImplementedError,
    zlib.error,
    zipfile.BadZipFile,
    tarfile.TarError,
)


class _Stream(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...

    def close(self) -> None: ...


def _already_open(stream: _Stream) -> _Stream:
    return stream


@dataclass(frozen=True)
class _Member:
    parts: tuple[str, ...]
    size: int
    open: Callable[[], _Stream] | None  # None for a directory


def _zip_members(archive: zipfile.ZipFile, limits: ArchiveLimits, label: str) -> list[_Member]:
    planned = []
    for info in check_zip(archive, limits, label):
        kind = stat.S_IFMT(info.external_attr >> 16)
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise UnsafeArchive(f"{label}: member {info.filename!r} is a link or a device")
        if info.flag_bits & 0x1:
            raise UnsafeArchive(f"{label}: member {info.filename!r} is encrypted")
        parts = member_parts(info.filename, label)
        opener = None if info.is_dir() else functools.partial(archive.open, info)
        planned.append(_Member(parts, info.file_size, opener))
    return planned


def _tar_headers(source: BinaryIO, limits: ArchiveLimits, label: str) -> Iterator[tarfile.TarInfo]:
    """Every header, checked as it comes (sizes before the data is skipped)."""
    source.seek(0)
    count = total = 0
    with tarfile.open(fileobj=source, mode="r|*") as archive:
        for info in archive:
            count += 1
            total += info.size
            if count > limits.max_members:
                raise UnsafeArchive(f"{label} has more than {limits.max_members:,} members")
            if total > limits.max_total_bytes:
                raise UnsafeArchive(
                    f"{label} would unpack to more than {limits.max_total_bytes:,} bytes"
                )
            if not (info.isreg() or info.isdir()):
                what = "a link" if info.issym() or info.islnk() else "a device or FIFO"
                raise UnsafeArchive(f"{label}: member {info.name!r} is {what}")
            member_parts(info.name, label)
            yield info


def _check_tar(source: BinaryIO, size: int, limits: ArchiveLimits, label: str) -> None:
    total = sum(info.size for info in _tar_headers(source, limits, label))
    if too_compressed(total, size, limits):
        raise UnsafeArchive(
            f"{label} is compressed more than {limits.max_ratio:.0f}:1, which looks like a bomb"
        )


class _Writer:
    """Creates members under a directory descriptor, never following a link."""

    def __init__(self, root: int, limits: ArchiveLimits, label: str) -> None:
        self.root = root
        self.limits = limits
        self.label = label
        self.written = 0
        self.seen: set[tuple[str, ...]] = set()
        self.top_level: list[tuple[str, bool]] = []
        self.files: list[str] = []

    def _directory(self, parts: tuple[str, ...]) -> int:
        fd = os.dup(self.root)
        try:
            for depth, part in enumerate(parts):
                try:
                    os.mkdir(part, 0o700, dir_fd=fd)
                    if depth == 0:
                        self.top_level.append((part, True))
                except FileExistsError:
                    pass
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                os.close(fd)
                fd = inner
        except BaseException:
            os.close(fd)
            raise
        return fd

    def add(self, member: _Member) -> None:
        if member.parts in self.seen:
            raise UnsafeArchive(f"{self.label}: {'/'.join(member.parts)} appears twice")
        self.seen.add(member.parts)
        if member.open is None:
            os.close(self._directory(member.parts))
            return
        parent = self._directory(member.parts[:-1])
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            fd = os.open(member.parts[-1], flags, 0o600, dir_fd=parent)
            if len(member.parts) == 1:
                self.top_level.append((member.parts[0], False))
            with os.fdopen(fd, "wb") as target, contextlib.closing(member.open()) as data:
                self._copy(member, data, target)
            self.files.append("/".join(member.parts))
        finally:
            os.close(parent)

    def _copy(self, member: _Member, data: _Stream, target: BinaryIO) -> None:
        copied = 0
        while chunk := data.read(CHUNK):
            copied += len(chunk)
            self.written += len(chunk)
            if copied > member.size or self.written > self.limits.max_total_bytes:
                raise UnsafeArchive(
                    f"{self.label}: {'/'.join(member.parts)} unpacks to more than "
                    f"{min(member.size, self.limits.max_total_bytes):,} bytes"
                )
            target.write(chunk)

    def remove_all(self) -> None:
        for name, is_dir in reversed(self.top_level):
            with contextlib.suppress(OSError):
                if is_dir:
                    shutil.rmtree(name, dir_fd=self.root)
                else:
                    os.unlink(name, dir_fd=self.root)


def _single_member(
    source: BinaryIO, fmt: ArchiveFormat, name: str, size: int, limits: ArchiveLimits
) -> _Member:
    """A .gz or .bz2 that is one compressed file, named after the archive."""
    stem = PurePosixPath(name).name
    for suffix in (".gz", ".bz2"):
        stem = stem.removesuffix(suffix)
    parts = member_parts(stem, name) if stem else ()
    if not parts:
        raise UnsafeArchive(f"{name}: cannot name the unpacked file")
    cap = min(limits.max_total_bytes, max(limits.ratio_floor, int(limits.max_ratio * size)))

    def opener() -> _Stream:
        source.seek(0)
        return decompressed(source, fmt)

    return _Member(parts, cap, opener)


def _members(source: BinaryIO, name: str, limits: ArchiveLimits) -> Iterator[_Member]:
    """Every member, after the whole archive has passed the checks."""
    size = source.seek(0, os.SEEK_END)
    source.seek(0)
    fmt = archive_format(source.read(512))
    if fmt in ("gzip", "bzip2"):
        source.seek(0)
        with decompressed(source, fmt) as opened:
            inner = archive_format(opened.read(512))
        if inner != "tar":
            yield _single_member(source, fmt, name, size, limits)
            return
        fmt = "tar"
    if fmt == "zip":
        source.seek(0)
        with zipfile.ZipFile(source) as archive:
            yield from _zip_members(archive, limits, name)
        return
    if fmt != "tar":
        raise UnsafeArchive(f"{name} is not a zip, tar, gzip or bzip2 archive")
    _check_tar(source, size, limits, name)
    source.seek(0)
    with tarfile.open(fileobj=source, mode="r|*") as archive:
        for info in archive:
            data = None if info.isdir() else archive.extractfile(info)
            opener = None if data is None else functools.partial(_already_open, data)
            yield _Member(member_parts(info.name, name), info.size, opener)


def safe_extract(
    source: BinaryIO, archive_name: str, destination: Path, limits: ArchiveLimits = EXTRACT_LIMITS
) -> list[str]:
    """Unpack `source` into the empty directory `destination`; returns the files written.

    `destination` itself must not be a link (it is opened with O_NOFOLLOW); the
    path above it is the caller's to trust. Raises `UnsafeArchive` and leaves
    `destination` empty when the archive is refused or damaged.
    """
    try:
        root = os.open(destination, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        raise UnsafeArchive(f"{archive_name}: the destination is not a plain folder") from None
    try:
        return safe_extract_at(source, archive_name, root, limits)
    finally:
        os.close(root)


def safe_extract_at(
    source: BinaryIO, archive_name: str, root: int, limits: ArchiveLimits = EXTRACT_LIMITS
) -> list[str]:
    """`safe_extract` into the empty directory open as the descriptor `root`."""
    if os.listdir(root):
        raise UnsafeArchive(f"{archive_name}: the destination folder is not empty")
    writer = _Writer(root, limits, archive_name)
    try:
        for member in _members(source, archive_name, limits):
            writer.add(member)
    except UnsafeArchive:
        writer.remove_all()
        raise
    except _DAMAGED as exc:
        writer.remove_all()
        raise UnsafeArchive(f"{archive_name} could not be unpacked: {exc}") from exc
    return writer.files
