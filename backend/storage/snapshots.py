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

Files are copied as they lie on disk (`sparse_copy.py`): holes stay holes, and
names that share an inode in the workspace share one in the snapshot (`links.json`
records them) and again in a restored workspace. What a snapshot or a restore will
allocate is counted before anything is written, and one that would take more than
its `budget` (the user's quota left) or the disk's room above `DISK_FLOOR` is
refused (`NoRoom`) with nothing written; the copies stop at the same bound.

`restore` puts a snapshot back (or, for None, the state before any turn): files
it lacks are deleted, files that differ are copied in, as the server's own
arrivals (`Staging.announce`), with their recorded mtimes. `HEAD` names the
snapshot the live workspace matches.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from backend.storage import workspace_tree
from backend.storage.drafts import is_draft
from backend.storage.sessions import SessionKey, check_key
from backend.storage.sparse_copy import Inode, OverLimit, allocation, copy_sparse, inode
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
LINKS = "links.json"  # {name: the earlier name whose file it shares}
HEAD = "HEAD"
MAX_FILES = 10_000
MAX_DEPTH = 64  # a state keeps no deeper folder; a restore removes such a folder whole
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY

Mark = tuple[int, int]  # (size, mtime_ns)


class TooManyFiles(Exception):
    """The workspace holds more files than a snapshot keeps."""


class NoRoom(Exception):
    """A snapshot or restore would allocate more than its bound; it wrote nothing (a
    restore's copies stop at the bound too, should the files change meanwhile)."""

    def __init__(self, needed: int, left: int, bound: Literal["quota", "disk"]) -> None:
        super().__init__(f"{needed} bytes needed, {left} left under the {bound}")
        self.needed = needed
        self.left = left
        self.bound: Literal["quota", "disk"] = bound


@dataclass(frozen=True)
class SnapshotCost:
    files: int
    linked: int  # unchanged since the snapshot the turn started from
    copied: int
    copied_bytes: int  # their apparent size
    seconds: float
    written: int = 0  # bytes the copies allocated (holes are not written)
    hard_links: int = 0  # further names of a file the snapshot holds already


@dataclass(frozen=True)
class _Bound:
    left: int
    name: Literal["quota", "disk"]

    def refuse(self, needed: int) -> NoRoom:
        return NoRoom(needed, max(self.left, 0), self.name)


class TurnSnapshots:
    def __init__(self, data_dir: Path, workspaces: Workspaces) -> None:
        self.root = data_dir / SNAPSHOTS_FOLDER
        self.workspaces = workspaces

    def folder(self, key: SessionKey) -> Path:
        return self.root / check_key(key)

    def head(self, key: SessionKey) -> int | None:
        """The turn whose snapshot the live workspace matches (None: before any turn, or
        a session from before snapshots)."""
        head = self.folder(key) / HEAD  # a bad key raises here, never reads as "no head"
        try:
            value = json.loads(head.read_text())["message_id"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return value if isinstance(value, int) else None

    def has(self, key: SessionKey, message_id: int) -> bool:
        return (self.folder(key) / str(message_id) / MANIFEST).is_file()

    def take(self, key: SessionKey, message_id: int, budget: int | None = None) -> SnapshotCost:
        """Snapshot the live workspace as the state after the turn `message_id` answered.
        Raises `NoRoom`, having written nothing, when its copies would allocate more than
        `budget` bytes (the user's quota left; None: no quota) or the disk's room."""
        started = time.perf_counter()
        folder = self.folder(key)
        base_id = self.head(key)
        base = self._manifest(key, base_id) if base_id is not None else {}
        base_files = folder / str(base_id) / "files"
        target = folder / str(int(message_id))
        draft = folder / f"{int(message_id)}.partial"
        root = os.open(self.workspaces.ensure(key), _DIRECTORY)
        try:
            needed = _snapshot_cost(root, base, base_files)
            bound = self._bound(key, needed, budget)
            shutil.rmtree(draft, ignore_errors=True)
            (draft / "files").mkdir(parents=True, mode=0o700)
            cost, manifest, links = _copy_state(root, base, base_files, draft / "files", bound)
        except BaseException:
            shutil.rmtree(draft, ignore_errors=True)
            raise
        finally:
            os.close(root)
        (draft / MANIFEST).write_text(json.dumps(manifest))
        (draft / LINKS).write_text(json.dumps(links))
        shutil.rmtree(target, ignore_errors=True)
        os.replace(draft, target)
        self._set_head(key, message_id)
        return dataclasses.replace(cost, seconds=time.perf_counter() - started)

    def restore(self, key: SessionKey, message_id: int | None, budget: int | None = None) -> None:
        """Make the live workspace (all but uploads/) what it was after `message_id`'s turn,
        or before any turn for None. The session's sandbox must be stopped first. Raises
        `NoRoom`, having changed nothing, when the copies would allocate more than what
        the files it deletes free plus `budget` (None: no quota) or the disk's room."""
        manifest = self._manifest(key, message_id) if message_id is not None else {}
        links = self._links(key, message_id) if message_id is not None else {}
        source = self.folder(key) / str(message_id) / "files"
        root = os.open(self.workspaces.ensure(key), _DIRECTORY)
        try:
            try:
                live = {relative: info for relative, _, _, info in _files(root)}
            except TooManyFiles:  # a run left too many: still restorable, all rewritten
                live = {}
            changed = [
                relative
                for relative, mark in manifest.items()
                if relative not in links and (relative not in live or _mark(live[relative]) != mark)
            ]
            needed = sum(_allocation_at(source / relative) for relative in changed)
            bound = self._bound(key, needed, budget, credit=_freed(live, set(manifest)))
            _remove_all_but(root, set(manifest), "")
        finally:
            os.close(root)
        spent = 0
        for relative in changed:
            mark = manifest[relative]
            draft = self.workspaces.draft(key, relative, create=True)
            try:
                with open(source / relative, "rb") as handle:
                    spent += copy_sparse(
                        handle.fileno(), draft.fd, mark[0], limit=bound.left - spent
                    )
                os.utime(draft.fd, ns=(mark[1], mark[1]))
            except OverLimit:
                draft.abort()
                raise bound.refuse(needed) from None
            except BaseException:
                draft.abort()
                raise
            draft.commit()
        rewritten = set(changed)
        for relative, first in links.items():
            kept = live.get(relative)
            if (
                first not in rewritten
                and kept is not None
                and first in live
                and inode(kept) == inode(live[first])
            ):
                continue  # the same file under both names already
            self.workspaces.link(key, first, relative)
        self._set_head(key, message_id)

    def _bound(self, key: SessionKey, needed: int, budget: int | None, credit: int = 0) -> _Bound:
        """The tighter of the user's `budget` and the disk's room above its floor, plus
        `credit` (bytes freed first); `NoRoom` when `needed` does not fit."""
        room = _Bound(self.workspaces.room(key) + credit, "disk")
        bound = room
        if budget is not None and budget + credit < room.left:
            bound = _Bound(budget + credit, "quota")
        if needed > bound.left:
            raise bound.refuse(needed)
        return bound

    def _manifest(self, key: SessionKey, message_id: int | None) -> dict[str, Mark]:
        try:
            raw = json.loads((self.folder(key) / str(message_id) / MANIFEST).read_text())
        except (OSError, ValueError):
            return {}
        return {path: (int(mark[0]), int(mark[1])) for path, mark in raw.items()}

    def _links(self, key: SessionKey, message_id: int) -> dict[str, str]:
        """Names that share their file with an earlier name of the snapshot (none in a
        snapshot from before links were kept)."""
        try:
            raw = json.loads((self.folder(key) / str(message_id) / LINKS).read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(raw, dict):
            return {}
        return {str(name): str(first) for name, first in raw.items()}

    def _set_head(self, key: SessionKey, message_id: int | None) -> None:
        folder = self.folder(key)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        draft = folder / f"{HEAD}.partial"
        draft.write_text(json.dumps({"message_id": message_id}))
        os.replace(draft, folder / HEAD)


def _snapshot_cost(root: int, base: dict[str, Mark], base_files: Path) -> int:
    """Bytes a snapshot of the workspace open as `root` will allocate: each file once,
    however many names it has, and nothing for a file linked to the base snapshot."""
    seen: set[Inode] = set()
    needed = 0
    for relative, directory, name, info in _files(root):
        if inode(info) in seen:
            continue
        seen.add(inode(info))
        if base.get(relative) == _mark(info) and (base_files / relative).is_file():
            continue
        with contextlib.suppress(OSError):  # gone since it was listed: not copied
            fd = os.open(name, _READ, dir_fd=directory)
            try:
                needed += allocation(fd)
            finally:
                os.close(fd)
    return needed


def _copy_state(
    root: int, base: dict[str, Mark], base_files: Path, files: Path, bound: _Bound
) -> tuple[SnapshotCost, dict[str, Mark], dict[str, str]]:
    """The workspace's files into `files`: a further name of a file copied already is a
    link to it, an unchanged file a link to the base snapshot's, any other a copy."""
    manifest: dict[str, Mark] = {}
    links: dict[str, str] = {}
    first_names: dict[Inode, str] = {}
    linked = copied = copied_bytes = written = hard_links = 0
    for relative, directory, name, info in _files(root):
        mark = _mark(info)
        destination = files / relative
        destination.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        first = first_names.get(inode(info))
        if first is not None and manifest[first] == mark and _link(files / first, destination):
            links[relative] = first
            hard_links += 1
        elif base.get(relative) == mark and _link(base_files / relative, destination):
            linked += 1
        else:
            try:
                done = _copy_out(directory, name, mark, destination, bound.left - written)
            except OverLimit:
                raise bound.refuse(written + _allocation_of(directory, name)) from None
            if done is None:
                continue  # it changed or went while we looked: not part of the state
            copied += 1
            copied_bytes += mark[0]
            written += done
        manifest[relative] = mark
        first_names.setdefault(inode(info), relative)
    cost = SnapshotCost(len(manifest), linked, copied, copied_bytes, 0.0, written, hard_links)
    return cost, manifest, links


def _freed(live: dict[str, os.stat_result], kept: set[str]) -> int:
    """Bytes that deleting the live files `kept` lacks frees: a file counts only when
    every one of its names goes."""
    going: dict[Inode, list[os.stat_result]] = {}
    for relative, info in live.items():
        if relative not in kept:
            going.setdefault(inode(info), []).append(info)
    staying = {inode(info) for relative, info in live.items() if relative in kept}
    return sum(
        infos[0].st_blocks * 512
        for key, infos in going.items()
        if key not in staying and len(infos) >= infos[0].st_nlink
    )


def _allocation_at(path: Path) -> int:
    fd = os.open(path, _READ)
    try:
        return allocation(fd)
    finally:
        os.close(fd)


def _allocation_of(directory: int, name: str) -> int:
    """`allocation` of the file `name` in the open `directory` (0: gone meanwhile)."""
    try:
        fd = os.open(name, _READ, dir_fd=directory)
    except OSError:
        return 0
    try:
        return allocation(fd)
    finally:
        os.close(fd)


def _mark(info: os.stat_result) -> Mark:
    return info.st_size, info.st_mtime_ns


def open_kept(workspaces: Workspaces, key: SessionKey, relative: str) -> BinaryIO:
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


def _files(root: int) -> Iterator[tuple[str, int, str, os.stat_result]]:
    """(relative path, its folder's fd, name, its lstat) of each regular file a run may have
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
                    yield relative, directory, entry.name, info
        finally:
            os.close(directory)


def _link(source: Path, destination: Path) -> bool:
    try:
        os.link(source, destination)
    except OSError:
        return False
    return True


def _copy_out(directory: int, name: str, mark: Mark, destination: Path, limit: int) -> int | None:
    """Copy the workspace file `name` (no link followed) if it still has `mark`; returns
    the bytes the copy allocated (None: not copied). `OverLimit` past `limit`."""
    try:
        fd = os.open(name, _READ, dir_fd=directory)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or _mark(info) != mark:
            return None
        out = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            return copy_sparse(fd, out, info.st_size, limit=limit)
        finally:
            os.close(out)
    finally:
        os.close(fd)


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
