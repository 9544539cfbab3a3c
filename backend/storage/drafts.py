"""A file written beside its final name and renamed over it once complete.

The draft is created with O_EXCL|O_NOFOLLOW relative to an open folder, so
nothing the sandbox planted is written through, and nobody sees a half-written
file under the final name: listings skip drafts (`is_draft`). A draft that is
abandoned (a failed or cut upload) is deleted.
"""

from __future__ import annotations

import contextlib
import os
import uuid

DRAFT_PREFIX = ".draft-"


def is_draft(name: str) -> bool:
    return name.startswith(DRAFT_PREFIX)


def write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd` (a single write may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Draft:
    """The next version of `name` in the folder open as `directory` (the draft keeps a copy
    of that descriptor, so the caller may close its own)."""

    def __init__(self, directory: int, name: str) -> None:
        self.name = name
        self.draft = f"{DRAFT_PREFIX}{uuid.uuid4().hex}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        self.directory = os.dup(directory)
        try:
            self._fd = os.open(self.draft, flags, 0o600, dir_fd=self.directory)
        except BaseException:
            os.close(self.directory)
            raise
        self.size = 0

    @property
    def fd(self) -> int:
        """The draft's open descriptor, for writers that need a path (/proc/self/fd/N)."""
        return self._fd

    def write(self, data: bytes) -> None:
        write_all(self._fd, data)
        self.size += len(data)

    def commit(self, *, durable: bool = False) -> int:
        """Rename the draft over `name`; returns the size written. `durable`: on disk first,
        so a crash cannot leave a complete-looking file with missing data."""
        try:
            if durable:
                os.fsync(self._fd)
            os.replace(self.draft, self.name, src_dir_fd=self.directory, dst_dir_fd=self.directory)
        except BaseException:
            self.abort()
            raise
        self._close()
        return self.size

    def abort(self) -> None:
        if self.directory < 0:
            return  # committed or aborted already
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.draft, dir_fd=self.directory)
        self._close()

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self.directory >= 0:
            os.close(self.directory)
            self.directory = -1
