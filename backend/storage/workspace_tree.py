"""A workspace folder walked, read and written by descriptor, never following a link.

Sandboxed code can plant a symlink, FIFO or device anywhere in its workspace, and swap
a folder for a link at any moment. So every path here is opened one component at a
time from an open descriptor of the folder's root with O_NOFOLLOW, only regular files
are read, and files are written as a draft that is renamed into place
(`backend.storage.drafts`). Errors are `OSError` (ELOOP, ENOTDIR: a link or a file
where a folder should be) or `NotARegularFile`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from backend.storage.drafts import Draft, is_draft
from backend.storage.workspaces import NotARegularFile, listable_name, open_folder

_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY


@dataclass(frozen=True)
class LocalFile:
    path: str  # relative, with `/` between folders
    size: int
    mtime_ns: int


def open_root(local: Path) -> int:
    """An open descriptor of `local` (created if missing); refused if it is a link."""
    local.mkdir(parents=True, exist_ok=True, mode=0o700)
    return os.open(local, _FOLDER)


def open_regular(root: int, parts: Sequence[str]) -> int:
    """A read-only descriptor of the regular file `parts` under `root`."""
    folder = open_folder(root, parts[:-1], create=False)
    try:
        fd = os.open(parts[-1], _READ, dir_fd=folder)
    finally:
        os.close(folder)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotARegularFile("/".join(parts))
    return fd


def stat_regular(root: int, parts: Sequence[str]) -> os.stat_result | None:
    """The regular file's status, or None if it is missing or anything else."""
    try:
        folder = open_folder(root, parts[:-1], create=False)
    except OSError:
        return None
    try:
        info = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(folder)
    return info if stat.S_ISREG(info.st_mode) else None


def draft(root: int, parts: Sequence[str]) -> Draft:
    """A draft of the file `parts` under `root`; its folders are created."""
    folder = open_folder(root, parts[:-1], create=True)
    try:
        return Draft(folder, parts[-1])
    finally:
        os.close(folder)


def remove(root: int, parts: Sequence[str]) -> bool:
    """Unlink the file `parts` (a link is removed, not followed); False if it was not there."""
    try:
        folder = open_folder(root, parts[:-1], create=False)
    except FileNotFoundError:
        return False
    try:
        os.unlink(parts[-1], dir_fd=folder)
    except FileNotFoundError:
        return False
    finally:
        os.close(folder)
    return True


def walk(root: int) -> tuple[list[LocalFile], list[str]]:
    """(regular files, other entries: links, FIFOs, devices) under `root`, in name order.

    Drafts and names the API could not carry (`listable_name`) are left out of both.
    """
    files: list[LocalFile] = []
    others: list[str] = []
    stack = [(os.dup(root), "")]
    try:
        while stack:
            fd, prefix = stack.pop()
            try:
                stack.extend(_scan(fd, prefix, files, others))
            finally:
                os.close(fd)
    finally:
        for fd, _ in stack:
            os.close(fd)
    return sorted(files, key=lambda f: f.path), sorted(others)


def _scan(fd: int, prefix: str, files: list[LocalFile], others: list[str]) -> list[tuple[int, str]]:
    """Add `fd`'s files to `files` and `others`; return its subfolders, open."""
    subfolders: list[tuple[int, str]] = []
    try:
        entries = list(os.scandir(fd))
    except OSError:
        return subfolders
    for entry in entries:
        if not listable_name(entry.name) or is_draft(entry.name):
            continue
        relative = prefix + entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                subfolders.append((os.open(entry.name, _FOLDER, dir_fd=fd), relative + "/"))
            elif entry.is_file(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                files.append(LocalFile(relative, info.st_size, info.st_mtime_ns))
            else:
                others.append(relative)
        except OSError:  # replaced meanwhile: a link now, or gone
            continue
    return subfolders
