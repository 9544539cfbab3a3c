"""Copying a file as it lies on disk: holes stay holes, and the cost is known first.

A file's apparent size says little of what it takes: `truncate -s 400M` makes a file
that holds no block. A copy made with read/write, or with copy_file_range (which fills
a hole with zeros), allocates every hole. Here a file is copied extent by extent
(`lseek` with SEEK_DATA and SEEK_HOLE), and its holes are left to `ftruncate`; where
the filesystem shares blocks (btrfs, XFS) it is a reflink instead.

`allocation` says what a copy will take before a byte of it is written: the larger of
the blocks the source holds and the bytes its extents will write. A copy given a
`limit` stops, raising `OverLimit`, before it writes past it. Hard links are the
callers' to keep (one copy per inode, see `Inode`).
"""

from __future__ import annotations

import errno
import fcntl
import os
from collections.abc import Iterator
from typing import Protocol

FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)
BLOCK = 4096  # what an extent's last, partial block costs at most
CHUNK = 1024 * 1024
_ZEROS = bytes(CHUNK)
_NO_CLONE = (errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL, errno.EBADF)
_NO_RANGE = (errno.EXDEV, errno.ENOSYS, errno.EOPNOTSUPP, errno.EINVAL)

Inode = tuple[int, int]  # (st_dev, st_ino): one file, however many names it has


class OverLimit(Exception):
    """The copy would write more than its `limit`; it stopped before doing so."""


class Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


def inode(info: os.stat_result) -> Inode:
    return info.st_dev, info.st_ino


def extents(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """(offset, length) of each run of data in the first `size` bytes of `fd`; a
    filesystem that cannot tell holes from data says the whole file is data."""
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # nothing but a hole from `offset` on
                return
            if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
            yield offset, size - offset
            return
        if start >= size:
            return
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        yield start, end - start
        offset = end


def allocation(fd: int) -> int:
    """Bytes a copy of the open file `fd` may allocate: the larger of its blocks on disk
    and what its extents hold (each rounded up to a whole block)."""
    info = os.fstat(fd)
    written = sum(-(-length // BLOCK) * BLOCK for _, length in extents(fd, info.st_size))
    return max(info.st_blocks * 512, written)


def copy_sparse(
    source: int, destination: int, size: int, *, limit: int | None = None, reflink: bool = True
) -> int:
    """The first `size` bytes of `source` into the empty `destination`, holes as holes;
    returns the bytes written, in whole blocks (0 for a reflink). Raises `OverLimit`
    before writing past `limit` bytes."""
    if reflink and size:
        try:
            fcntl.ioctl(destination, FICLONE, source)
            os.ftruncate(destination, size)
            return 0
        except OSError as exc:
            if exc.errno not in _NO_CLONE:
                raise
    written = 0
    for start, length in extents(source, size):
        blocks = -(-length // BLOCK) * BLOCK
        if limit is not None and written + blocks > limit:
            raise OverLimit(f"{written + blocks} bytes to write, {limit} allowed")
        _copy_range(source, destination, start, length)
        written += blocks
    os.ftruncate(destination, size)
    return written


def copy_hashed(source: int, destination: int, size: int, digest: Digest) -> int:
    """`copy_sparse` through Python, hashing every byte (a hole as the zeros it reads
    as); returns the size copied, less than `size` if the file shrank meanwhile."""
    position = 0
    for start, length in extents(source, size):
        _hash_zeros(digest, start - position)
        offset, end = start, start + length
        while offset < end:
            chunk = os.pread(source, min(CHUNK, end - offset), offset)
            if not chunk:  # the file shrank while it was copied
                os.ftruncate(destination, offset)
                return offset
            digest.update(chunk)
            _pwrite_all(destination, chunk, offset)
            offset += len(chunk)
        position = end
    _hash_zeros(digest, size - position)
    os.ftruncate(destination, size)
    return size


def _copy_range(source: int, destination: int, offset: int, length: int) -> int:
    """`length` bytes at `offset`, in the kernel where it can; stops early at EOF."""
    done = 0
    while done < length:
        at = offset + done
        try:
            step = os.copy_file_range(source, destination, length - done, at, at)
        except OSError as exc:
            if exc.errno not in _NO_RANGE:
                raise
            chunk = os.pread(source, min(CHUNK, length - done), at)
            step = len(chunk)
            _pwrite_all(destination, chunk, at)
        if step == 0:
            break
        done += step
    return done


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def _hash_zeros(digest: Digest, count: int) -> None:
    while count > 0:
        step = min(count, CHUNK)
        digest.update(_ZEROS[:step])
        count -= step
