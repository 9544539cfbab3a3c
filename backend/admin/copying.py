"""DATA_DIR's folders copied into a backup: each file read once, as it is hashed.

Sandboxed code can plant links, FIFOs and devices in its workspace, and swap a
folder for a link at any moment, so folders are opened one component at a time
with O_NOFOLLOW and only regular files are read; anything else is counted and
skipped. Files that share an inode (a turn snapshot's unchanged files, a run's hard
links) are linked in the copy too, and a file's holes stay holes (`sparse_copy.py`):
a sparse file costs the backup what it holds, not its apparent size. Folders are
walked with a list, not recursion: a workspace may nest folders deeper than Python's
stack.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from backend.admin.manifest import CHUNK, DATA, StoredFile
from backend.storage.drafts import write_all
from backend.storage.sparse_copy import copy_hashed
from backend.storage.workspaces import listable_name, open_folder

_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
_WRITE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW


class TreeCopy:
    """Copies from `source` (DATA_DIR) into `target` (the backup folder), listing each
    file in `files` and counting what was skipped in `skipped`."""

    def __init__(
        self,
        source: Path,
        target: Path,
        *,
        transient: Callable[[str], bool],
        whole_lines: Callable[[str], bool],
    ) -> None:
        self.source = source
        self.target = target
        self.transient = transient
        self.whole_lines = whole_lines
        self.files: list[StoredFile] = []
        self.folders: list[str] = []
        self.skipped: Counter[str] = Counter()
        self._inodes: dict[tuple[int, int], StoredFile] = {}

    def copy_tree(self, name: str) -> None:
        """The folder `name` of DATA_DIR, everything under it. Only `name` itself may be a
        link (an operator's, e.g. to another disk): nothing below it is followed."""
        top = os.open(self.source / name, os.O_RDONLY | os.O_DIRECTORY)
        try:
            pending = [name]
            while pending:
                self._copy_folder(top, pending.pop(), pending)
        finally:
            os.close(top)

    def copy_file(self, name: str) -> None:
        """One file at DATA_DIR's top level."""
        root = os.open(self.source, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self._copy_file(root, name, name)
        finally:
            os.close(root)

    def _copy_folder(self, top: int, relative: str, pending: list[str]) -> None:
        try:
            folder = open_folder(top, relative.split("/")[1:], create=False)
        except OSError:  # a link (ELOOP, ENOTDIR), or removed since it was listed
            self.skipped["links and other non-files"] += 1
            return
        try:
            (self.target / DATA / relative).mkdir(mode=0o700, parents=True, exist_ok=True)
            self.folders.append(f"{DATA}/{relative}")
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
            folders = []
            for entry in entries:
                child = f"{relative}/{entry.name}"
                if not listable_name(entry.name):  # not UTF-8, or a control character
                    self.skipped["names a manifest cannot hold"] += 1
                elif self.transient(child):
                    self.skipped["files being written"] += 1
                elif entry.is_dir(follow_symlinks=False):
                    folders.append(child)
                elif entry.is_file(follow_symlinks=False):
                    self._copy_file(folder, entry.name, child)
                else:
                    self.skipped["links and other non-files"] += 1
            pending.extend(reversed(folders))  # popped in name order
        finally:
            os.close(folder)

    def _copy_file(self, folder: int, name: str, relative: str) -> None:
        try:
            fd = os.open(name, _READ, dir_fd=folder)
        except FileNotFoundError:
            self.skipped["files removed while copying"] += 1
            return
        except OSError:  # ELOOP: a link planted since it was listed
            self.skipped["links and other non-files"] += 1
            return
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                self.skipped["links and other non-files"] += 1
                return
            path = f"{DATA}/{relative}"
            destination = self.target / path
            destination.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            same = self._inodes.get((info.st_dev, info.st_ino)) if info.st_nlink > 1 else None
            if same is not None and _link(self.target / same.path, destination):
                entry = same.model_copy(update={"path": path, "same_as": same.path})
            else:
                size, digest = _copy(fd, destination, self.whole_lines(relative))
                mode = stat.S_IMODE(info.st_mode)
                entry = StoredFile(
                    path=path, size=size, sha256=digest, mtime_ns=info.st_mtime_ns, mode=mode
                )
                if info.st_nlink > 1:
                    self._inodes[(info.st_dev, info.st_ino)] = entry
            self.files.append(entry)
        finally:
            os.close(fd)


def _link(existing: Path, destination: Path) -> bool:
    try:
        os.link(existing, destination)
    except OSError:  # a file system without hard links: copy instead
        return False
    return True


def _copy(fd: int, destination: Path, whole_lines: bool) -> tuple[int, str]:
    """Write what `fd` holds to `destination` as it is hashed, its holes left holes; with
    `whole_lines`, up to its last newline (a line being appended is left for the next
    backup)."""
    digest = hashlib.sha256()
    size = 0
    held = b""
    out = os.open(destination, _WRITE, 0o600)
    try:
        if not whole_lines:
            size = copy_hashed(fd, out, os.fstat(fd).st_size, digest)
        while whole_lines and (chunk := os.read(fd, CHUNK)):
            chunk, held = _split_at_last_newline(held + chunk)
            digest.update(chunk)
            write_all(out, chunk)
            size += len(chunk)
    except BaseException:
        os.close(out)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(destination)
        raise
    os.close(out)
    return size, digest.hexdigest()


def _split_at_last_newline(data: bytes) -> tuple[bytes, bytes]:
    end = data.rfind(b"\n") + 1
    return data[:end], data[end:]
