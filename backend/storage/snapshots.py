"""Each agent turn's data state, kept so that a branch can go back to it.

After an agent turn, what the session's runs can change (persisted variables, the
files they wrote, the notepad: everything in the workspace but `uploads/`, which
is the user's) is snapshot into `DATA_DIR/snapshots/<key>/<message id>/`, out of
the sandbox's sight. A snapshot costs what the turn changed, not what the
workspace holds: a file the turn left alone (same size and mtime as in the
snapshot the turn started from) is a hard link to that snapshot's copy; a file it
wrote is copied, as a reflink where the filesystem has them (btrfs, XFS), so
its blocks are shared until one side changes. Snapshot files are never written
again, so the links are safe; the live workspace never shares an inode with them,
because runs may rewrite files in place.

`restore` puts a snapshot back (or, for None, the state before any turn): files
it lacks are deleted, files that differ are copied in, as the server's own
arrivals (`Staging.announce`), with their recorded mtimes. `HEAD` names the
snapshot the live workspace matches.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from backend.storage import workspace_tree
from backend.storage.drafts import is_draft
from backend.storage.sessions import check_key
from backend.storage.tree_removal import remove_tree
from backend.storage.workspaces import (
    SNAPSHOTS_FOLDER,
    SUBFOLDERS,
    NotARegularFile,
    Workspaces,
    listable_name,
    open_folder,
    safe_relative,
)

logger = logging.getLogger(__name__)

KEPT = "uploads"  # the user's own files: never snapshot, never rolled back
MANIFEST = "manifest.json"
HEAD = "HEAD"
MAX_FILES = 10_000
MAX_DEPTH = 64  # a state keeps no deeper folder; a restore removes such a folder whole
FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int)
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY

Mark = tuple[int, int]  # (size, mtime_ns)


class TooManyFiles(Exception):
    """The workspace holds more files than a snapshot keeps."""


@dataclass(frozen=True)
class SnapshotCost:
    files: int
    linked: int  # unchanged since the snapshot the turn started from
    copied: int
    copied_bytes: int
    seconds: float


class TurnSnapshots:
    def __init__(self, data_dir: Path, workspaces: Workspaces) -> None:
        self.root = data_dir / SNAPSHOTS_FOLDER
        self.workspaces = workspaces

    def folder(self, key: str) -> Path:
        return self.root / check_key(key)

    def head(self, key: str) -> int | None:
        """The turn whose snapshot the live workspace matches (None: before any turn, or
        a session from before snapshots)."""
        head = self.folder(key) / HEAD  # a bad key raises here, never reads as "no head"
        try:
            value = json.loads(head.read_text())["message_id"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return value if isinstance(value, int) else None

    def has(self, key: str, message_id: int) -> bool:
        return (self.folder(key) / str(message_id) / MANIFEST).is_file()

    def take(self, key: str, message_id: int) -> SnapshotCost:
        """Snapshot the live workspace as the state after the turn `message_id` answered."""
        started = time.perf_counter()
        folder = self.folder(key)
        base_id = self.head(key)
        base = self._manifest(key, base_id) if base_id is not None else {}
        target = folder / str(int(message_id))
        draft = folder / f"{int(message_id)}.partial"
        shutil.rmtree(draft, ignore_errors=True)
        (draft / "files").mkdir(parents=True, mode=0o700)
        manifest: dict[str, Mark] = {}
        linked = copied = copied_bytes = 0
        root = os.open(self.workspaces.ensure(key), _DIRECTORY)
        try:
            for relative, directory, name, mark in _files(root):
                destination = draft / "files" / relative
                destination.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                if base.get(relative) == mark and _link(
                    folder / str(base_id) / "files" / relative, destination
                ):
                    linked += 1
                elif _copy_out(directory, name, mark, destination):
                    copied += 1
                    copied_bytes += mark[0]
                else:
                    continue  # it changed or went while we looked: not part of the state
                manifest[relative] = mark
        except BaseException:
            shutil.rmtree(draft, ignore_errors=True)
            raise
        finally:
            os.close(root)
        (draft / MANIFEST).write_text(json.dumps(manifest))
        shutil.rmtree(target, ignore_errors=True)
        os.replace(draft, target)
        self._set_head(key, message_id)
        return SnapshotCost(
            len(manifest), linked, copied, copied_bytes, time.perf_counter() - started
        )

    def restore(self, key: str, message_id: int | None) -> None:
        """Make the live workspace (all but uploads/) what it was after `message_id`'s turn,
        or before any turn for None. The session's sandbox must be stopped first."""
        manifest = self._manifest(key, message_id) if message_id is not None else {}
        source = self.folder(key) / str(message_id) / "files"
        root = os.open(self.workspaces.ensure(key), _DIRECTORY)
        try:
            try:
                live = {relative: mark for relative, _, _, mark in _files(root)}
            except TooManyFiles:  # a run left too many: still restorable, all rewritten
                live = {}
            _remove_all_but(root, set(manifest), "")
        finally:
            os.close(root)
        for relative, mark in manifest.items():
            if live.get(relative) == mark:
                continue
            draft = self.workspaces.draft(key, relative, create=True)
            try:
                with open(source / relative, "rb") as handle:
                    _clone(handle.fileno(), draft.fd, mark[0])
                os.utime(draft.fd, ns=(mark[1], mark[1]))
            except BaseException:
                draft.abort()
                raise
            draft.commit()
        self._set_head(key, message_id)

    def _manifest(self, key: str, message_id: int | None) -> dict[str, Mark]:
        try:
            raw = json.loads((self.folder(key) / str(message_id) / MANIFEST).read_text())
        except (OSError, ValueError):
            return {}
        return {path: (int(mark[0]), int(mark[1])) for path, mark in raw.items()}

    def _set_head(self, key: str, message_id: int | None) -> None:
        folder = self.folder(key)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        draft = folder / f"{HEAD}.partial"
        draft.write_text(json.dumps({"message_id": message_id}))
        os.replace(draft, folder / HEAD)


def open_kept(workspaces: Workspaces, key: str, relative: str) -> BinaryIO:
    """`Workspaces.open_file`, and for a file under outputs/ that is not in the workspace
    (a run on another branch wrote it: a plot, a chart, a table), the copy the newest
    snapshot kept. Such files are named by their run, so the copy is that file."""
    try:
        return workspaces.open_file(key, relative)
    except (FileNotFoundError, NotADirectoryError, NotARegularFile):
        parts = safe_relative(relative).parts
        if parts[0] != "outputs":
            raise
    kept = workspaces.root.parent / SNAPSHOTS_FOLDER / check_key(key)
    with contextlib.suppress(FileNotFoundError):
        turns = sorted((int(p.name) for p in kept.iterdir() if p.name.isdigit()), reverse=True)
        for turn in turns:
            with contextlib.suppress(OSError):
                root = os.open(kept / str(turn) / "files", _DIRECTORY)
                try:
                    return os.fdopen(workspace_tree.open_regular(root, parts), "rb")
                finally:
                    os.close(root)
    raise FileNotFoundError(relative)


def _files(root: int) -> Iterator[tuple[str, int, str, Mark]]:
    """(relative path, its folder's fd, name, mark) of each regular file a run may have
    written; links, FIFOs and devices are skipped, no link is followed. The folder's fd
    is open only while its files are being yielded: folders waiting their turn are kept
    by name, not open, since a run may make thousands of them (EMFILE would skip some)."""
    count = 0
    stack = [""]
    while stack:
        prefix = stack.pop()
        try:
            directory = open_folder(root, prefix.split("/")[:-1], create=False)
        except OSError:  # replaced by a link, or removed, since it was listed
            continue
        try:
            with os.scandir(directory) as entries:
                listed = list(entries)
            for entry in listed:
                relative = f"{prefix}{entry.name}"
                if relative == KEPT or is_draft(entry.name) or not listable_name(entry.name):
                    continue
                info = entry.stat(follow_symlinks=False)
                folder, regular = stat.S_ISDIR(info.st_mode), stat.S_ISREG(info.st_mode)
                count += folder or regular  # folders count too: a run may make millions
                if count > MAX_FILES:
                    raise TooManyFiles(f"more than {MAX_FILES} files and folders")
                if folder and relative.count("/") < MAX_DEPTH:  # deeper: not in a state
                    stack.append(f"{relative}/")
                elif regular:
                    yield relative, directory, entry.name, (info.st_size, info.st_mtime_ns)
        finally:
            os.close(directory)


def _link(source: Path, destination: Path) -> bool:
    try:
        os.link(source, destination)
    except OSError:
        return False
    return True


def _copy_out(directory: int, name: str, mark: Mark, destination: Path) -> bool:
    """Copy the workspace file `name` (no link followed) if it still has `mark`."""
    try:
        fd = os.open(name, _READ, dir_fd=directory)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or (info.st_size, info.st_mtime_ns) != mark:
            return False
        out = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            _clone(fd, out, info.st_size)
        finally:
            os.close(out)
    finally:
        os.close(fd)
    return True


def _clone(source: int, destination: int, size: int) -> None:
    """`source`'s bytes into the empty `destination`: a reflink where the filesystem
    shares blocks, else an in-kernel copy."""
    try:
        fcntl.ioctl(destination, FICLONE, source)
        return
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL):
            raise
    copied = 0
    while copied < size:
        done = os.copy_file_range(source, destination, size - copied, copied, copied)
        if done == 0:
            break
        copied += done


def _remove_all_but(directory: int, kept: set[str], prefix: str) -> None:
    """Delete what runs left that `kept` (relative paths) lacks, never following a link;
    uploads/ and the workspace's own folders stay."""
    with os.scandir(directory) as entries:
        listed = list(entries)
    for entry in listed:
        relative = f"{prefix}{entry.name}"
        if relative == KEPT or is_draft(entry.name):
            continue
        if entry.is_dir(follow_symlinks=False):
            folders = f"{relative}/"
            if prefix.count("/") >= MAX_DEPTH and not any(k.startswith(folders) for k in kept):
                with contextlib.suppress(OSError):  # deeper than a state keeps: gone whole
                    remove_tree(directory, entry.name)
                continue
            with contextlib.suppress(OSError):
                inner = os.open(entry.name, _DIRECTORY, dir_fd=directory)
                try:
                    _remove_all_but(inner, kept, f"{relative}/")
                finally:
                    os.close(inner)
            if relative not in SUBFOLDERS:
                with contextlib.suppress(OSError):  # not empty: it holds kept files
                    os.rmdir(entry.name, dir_fd=directory)
        elif relative not in kept:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.name, dir_fd=directory)
