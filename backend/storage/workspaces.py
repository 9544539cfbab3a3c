"""Per-session scratch workspaces: `DATA_DIR/scratch/<session key>/`.

Only a session key (`backend/storage/sessions.py`, `u<user id>-<session id>`) names a
workspace, whoever the caller: anything else is `InvalidSession`.

Sandboxed code can write anything into its workspace: symlinks to server files,
FIFOs, devices. So the server never follows a link there, opens only regular
files, and walks paths one component at a time relative to the workspace.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import stat
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from backend.storage.drafts import DRAFT_PREFIX, Draft, Staging, is_draft, staging_of
from backend.storage.sessions import SessionKey, check_key, valid_session_id
from backend.storage.tree_removal import remove_tree

SUBFOLDERS = ("uploads", "outputs", "variables", "scripts")
# The server's own files in a workspace, beside hidden names: the persisted variables
# (backend/tools/sandbox/variables.py), the run scripts and the notepad (python_coder).
SERVER_FOLDERS = ("variables", "scripts")
SERVER_FILES = ("notepad.json",)
SNAPSHOTS_FOLDER = "snapshots"  # DATA_DIR/snapshots/<key>: its turns' states (snapshots.py)
# Free space that uploads, extractions and runs must leave on the disk (the sandbox worker's
# DISK_FLOOR_BYTES): the server's own database and logs live there too.
DISK_FLOOR = 1024**3
MAX_LISTED = 2_000
MAX_FOLDERS = 2_000
_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_UNLISTABLE = re.compile(r"[\x00-\x1f\x7f\\]")

# Extensions the tools understand (the seeds' list).
SUPPORTED_EXTENSIONS = frozenset(
    [
        "txt",
        "md",
        "log",
        "csv",
        "tsv",
        "json",
        "jsonl",
        "xml",
        "yaml",
        "yml",
        "xlsx",
        "xls",
        "xlsm",
        "docx",
        "pdf",
        "parquet",
        "feather",
        "h5",
        "hdf5",
        "nc",
        "dat",
        "png",
        "jpg",
        "jpeg",
        "gif",
        "bmp",
        "tif",
        "tiff",
        "webp",
        "zip",
        "tar",
        "gz",
        "tgz",
        "bz2",
        "html",
        "htm",
        "sql",
        # Database files: read in the sandbox, or registered as data sources.
        "sqlite",
        "sqlite3",
        "db",
        "duckdb",
    ]
)


class UnsafePath(Exception):
    """The name tries to leave the workspace, or is not a plain relative path."""


class FileTooLarge(Exception):
    """An upload is over PYTHON_CODE_MAX_FILE_SIZE."""


class NotARegularFile(Exception):
    """The path is a link, a FIFO, a device or a directory."""


@dataclass(frozen=True)
class WorkspaceFile:
    path: str
    size: int
    modified: float


def safe_relative(name: str) -> PurePosixPath:
    """A relative path inside the workspace, or `UnsafePath`."""
    if not name or "\x00" in name or "\\" in name:
        raise UnsafePath(name)
    path = PurePosixPath(name)
    if path.is_absolute() or any(part in ("", ".", "..") for part in path.parts):
        raise UnsafePath(name)
    return path


def safe_filename(name: str) -> str:
    """An upload's base name, refused if it is anything but a plain file name."""
    path = safe_relative(name)
    if len(path.parts) != 1 or name.startswith("."):
        raise UnsafePath(name)
    return name


class Workspaces:
    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "scratch"

    def path(self, session_id: SessionKey) -> Path:
        """The workspace of the session key `session_id` (`InvalidSession` for any other name)."""
        return self.root / check_key(session_id)

    def remove(self, session_id: SessionKey) -> None:
        """Delete the workspace and everything in it; links in it are removed, never followed."""
        workspace = self.path(session_id)
        with contextlib.suppress(FileNotFoundError):
            root = os.open(workspace.parent, _DIRECTORY_FLAGS)
            try:
                remove_tree(root, workspace.name)  # by fd: safe against swapped-in links
            finally:
                os.close(root)
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(staging_of(workspace))
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(workspace.parent.parent / SNAPSHOTS_FOLDER / workspace.name)

    def staging(self, session_id: SessionKey) -> Staging:
        """The server's own folder for the session's drafts, outside its workspace."""
        return Staging(self.path(session_id))

    def adopt_legacy(self, old_id: str, session_id: SessionKey) -> bool:
        """Rename a workspace from before sessions had keys (`scratch/<old id>`) to its key."""
        target = self.path(session_id)
        if not valid_session_id(old_id) or target.exists():
            return False
        try:
            os.rename(self.root / old_id, target)
        except FileNotFoundError:
            return False
        return True

    def ensure(self, session_id: SessionKey) -> Path:
        """Create the workspace and its folders; never follows what the sandbox planted.

        Sandboxed code can put a symlink (to any host file) wherever we are about to
        create something, at any moment. So everything is created relative to the
        workspace's own descriptor, with O_EXCL|O_NOFOLLOW, and an existing entry of
        the wrong kind is left alone: reads of it fail cleanly later.
        """
        workspace = self.path(session_id)
        workspace.mkdir(parents=True, exist_ok=True, mode=0o700)
        root = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for folder in SUBFOLDERS:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(folder, 0o700, dir_fd=root)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
            with contextlib.suppress(FileExistsError):
                fd = os.open("notepad.json", flags, 0o600, dir_fd=root)
                with os.fdopen(fd, "w") as handle:
                    handle.write('{"entries": []}\n')
        finally:
            os.close(root)
        return workspace

    def _open(self, session_id: SessionKey, relative: str) -> int:
        """A read-only fd for a regular file, refusing links at every component."""
        parts = safe_relative(relative).parts
        directory = os.open(self.path(session_id), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            for part in parts[:-1]:
                inner = os.open(
                    part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=directory
                )
                os.close(directory)
                directory = inner
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
            try:
                fd = os.open(parts[-1], flags, dir_fd=directory)
            except OSError as exc:  # ELOOP: it is a symlink
                raise NotARegularFile(relative) from exc
        except NotADirectoryError as exc:
            raise NotARegularFile(relative) from exc
        finally:
            os.close(directory)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise NotARegularFile(relative)
        return fd

    def open_file(self, session_id: SessionKey, relative: str) -> BinaryIO:
        """A read-only binary handle on a regular file; no link is ever followed."""
        return os.fdopen(self._open(session_id, relative), "rb")

    def read_chunks(
        self,
        session_id: SessionKey,
        relative: str,
        size: int = 65536,
        *,
        opened: BinaryIO | None = None,
    ) -> Iterator[bytes]:
        """The file's bytes, from `opened` if the caller opened it already."""
        handle = opened or self.open_file(session_id, relative)

        def chunks() -> Iterator[bytes]:
            with handle:
                while chunk := handle.read(size):
                    yield chunk

        return chunks()

    def room(self, session_id: SessionKey) -> int:
        """Bytes that may still be written to the workspace's disk, above the floor."""
        disk = os.statvfs(self.ensure(session_id))
        return disk.f_bavail * disk.f_frsize - DISK_FLOOR

    def upload_draft(self, session_id: SessionKey, name: str) -> Draft:
        """A draft of uploads/<name>, for a body that arrives in pieces (`Draft.commit`)."""
        return self.draft(session_id, f"uploads/{safe_filename(name)}")

    def draft(self, session_id: SessionKey, relative: str, *, create: bool = False) -> Draft:
        """A draft of the file `relative` (`Draft.commit`); its folders must exist
        unless `create`."""
        parts = safe_relative(relative).parts
        folder = self._parent(session_id, parts, create=create)
        try:
            return Draft(folder, parts[-1], self.staging(session_id), "/".join(parts))
        finally:
            os.close(folder)

    def link(self, session_id: SessionKey, existing: str, relative: str) -> None:
        """Make `relative` another name (a hard link) of the workspace's regular file
        `existing`, moved in as the server's own arrival; no link is followed."""
        source_parts, parts = safe_relative(existing).parts, safe_relative(relative).parts
        staging = self.staging(session_id)
        source = self._parent(session_id, source_parts, create=False)
        try:
            folder = self._parent(session_id, parts, create=True)
            try:
                drafts = staging.drafts_folder()
                try:
                    draft = f"{DRAFT_PREFIX}{uuid.uuid4().hex}"
                    os.link(
                        source_parts[-1],
                        draft,
                        src_dir_fd=source,
                        dst_dir_fd=drafts,
                        follow_symlinks=False,
                    )
                    try:
                        info = os.stat(draft, dir_fd=drafts, follow_symlinks=False)
                        if not stat.S_ISREG(info.st_mode):
                            raise NotARegularFile(existing)
                        staging.announce("/".join(parts), info)
                        os.replace(draft, parts[-1], src_dir_fd=drafts, dst_dir_fd=folder)
                    except BaseException:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(draft, dir_fd=drafts)
                        raise
                finally:
                    os.close(drafts)
            finally:
                os.close(folder)
        finally:
            os.close(source)

    def adopt_upload(self, session_id: SessionKey, name: str, folder: int, source: str) -> None:
        """Rename `source` (in the open `folder`, on the same disk) to uploads/<name>."""
        filename = safe_filename(name)
        uploads = self._parent(session_id, ("uploads", filename), create=False)
        try:
            moved = os.stat(source, dir_fd=folder, follow_symlinks=False)
            self.staging(session_id).announce(f"uploads/{filename}", moved)
            os.replace(source, filename, src_dir_fd=folder, dst_dir_fd=uploads)
        finally:
            os.close(uploads)

    def write_upload(
        self, session_id: SessionKey, name: str, source: BinaryIO, max_bytes: int
    ) -> int:
        """Copy `source` to uploads/<name> without following links; returns the size.

        Raises `FileTooLarge` past `max_bytes`, leaving nothing behind.
        """
        filename = safe_filename(name)
        uploads = self._parent(session_id, ("uploads", filename), create=False)
        try:
            chunks = iter(lambda: source.read(1024 * 1024), b"")
            staged = (self.staging(session_id), f"uploads/{filename}")
            return _replace_atomically(uploads, filename, chunks, max_bytes, staged)
        finally:
            os.close(uploads)

    def read_json(self, session_id: SessionKey, relative: str, max_bytes: int) -> Any:
        """A workspace JSON file's value, or None if it is missing, too big or not JSON."""
        try:
            fd = self._open(session_id, relative)
        except (OSError, UnsafePath, NotARegularFile):
            return None
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(max_bytes + 1)
        if len(data) > max_bytes:
            return None
        try:
            return json.loads(data)
        except (ValueError, RecursionError):
            return None

    def _parent(self, session_id: SessionKey, parts: tuple[str, ...], *, create: bool) -> int:
        """An open descriptor of the folder holding `parts[-1]`, walked without links."""
        root = os.open(self.ensure(session_id), _DIRECTORY_FLAGS)
        try:
            return open_folder(root, parts[:-1], create=create)
        finally:
            os.close(root)

    def new_folder(self, session_id: SessionKey, relative: str) -> int:
        """Create the folder `relative` (its parent must exist); returns its open descriptor.

        Raises `FileExistsError` if anything is already there.
        """
        parts = safe_relative(relative).parts
        parent = self._parent(session_id, parts, create=False)
        try:
            os.mkdir(parts[-1], 0o700, dir_fd=parent)
            return os.open(parts[-1], _DIRECTORY_FLAGS, dir_fd=parent)
        finally:
            os.close(parent)

    def write_file(self, session_id: SessionKey, relative: str, data: bytes) -> None:
        """Atomically replace `relative` (its folders are created), never following links."""
        parts = safe_relative(relative).parts
        parent = self._parent(session_id, parts, create=True)
        try:
            staged = (self.staging(session_id), "/".join(parts))
            _replace_atomically(parent, parts[-1], [data], None, staged)
        finally:
            os.close(parent)

    def delete_file(self, session_id: SessionKey, relative: str) -> None:
        """Remove the file `relative` (a link is removed, never followed); `FileNotFoundError`
        if it is not there, `NotARegularFile` for a folder."""
        parts = safe_relative(relative).parts
        parent = self._parent(session_id, parts, create=False)
        try:
            info = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                raise NotARegularFile(relative)
            os.unlink(parts[-1], dir_fd=parent)
        finally:
            os.close(parent)

    def list_files(self, session_id: SessionKey) -> list[WorkspaceFile]:
        """Regular files, walked by descriptor so a folder swapped for a link is not followed.

        Names the API could not carry (not UTF-8, a backslash, control characters)
        are skipped: only sandboxed code can create them.
        """
        try:
            root = os.open(self.path(session_id), _DIRECTORY_FLAGS)
        except OSError:
            return []
        found: list[WorkspaceFile] = []
        stack: list[tuple[int, str]] = [(root, "")]
        folders = 0
        try:
            while stack:
                fd, prefix = stack.pop()
                try:
                    if len(found) < MAX_LISTED and folders < MAX_FOLDERS:
                        folders += 1
                        budget = MAX_FOLDERS - folders - len(stack)  # open descriptors too
                        stack.extend(self._scan(fd, prefix, found, budget))
                finally:
                    os.close(fd)
        finally:
            for fd, _ in stack:
                os.close(fd)
        return sorted(found, key=lambda f: f.path)

    @staticmethod
    def _scan(
        fd: int, prefix: str, found: list[WorkspaceFile], budget: int
    ) -> list[tuple[int, str]]:
        """Add `fd`'s files to `found`; return up to `budget` of its subfolders, open."""
        subfolders: list[tuple[int, str]] = []
        try:
            entries = sorted(os.scandir(fd), key=lambda e: e.name)
        except OSError:
            return subfolders
        for entry in entries:
            if len(found) >= MAX_LISTED or not listable_name(entry.name) or is_draft(entry.name):
                continue  # a draft is a file still being written (an upload in progress)
            relative = prefix + entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if len(subfolders) >= budget:
                        continue
                    inner = os.open(entry.name, _DIRECTORY_FLAGS, dir_fd=fd)
                    subfolders.append((inner, relative + "/"))
                elif entry.is_file(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    found.append(WorkspaceFile(relative, info.st_size, info.st_mtime))
            except OSError:  # replaced meanwhile: a link now, or gone
                continue
        return subfolders


def _replace_atomically(
    directory: int,
    name: str,
    chunks: Iterable[bytes],
    max_bytes: int | None = None,
    staged: tuple[Staging, str] | None = None,
) -> int:
    """Write `chunks` to a draft of `name` in `directory` (or in `staged`'s staging, moving
    in as its workspace path), then rename it over `name`.

    Raises `FileTooLarge` past `max_bytes`, leaving nothing behind.
    """
    draft = Draft(directory, name, *(staged or (None, None)))
    try:
        for chunk in chunks:
            if max_bytes is not None and draft.size + len(chunk) > max_bytes:
                raise FileTooLarge(name)
            draft.write(chunk)
    except BaseException:
        draft.abort()
        raise
    return draft.commit()


def open_folder(root: int, parts: Sequence[str], *, create: bool) -> int:
    """An open descriptor of the folder `parts` under `root`, walked without links
    (each folder made first when `create`)."""
    directory = os.dup(root)
    try:
        for part in parts:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=directory)
            inner = os.open(part, _DIRECTORY_FLAGS, dir_fd=directory)
            os.close(directory)
            directory = inner
    except BaseException:
        os.close(directory)
        raise
    return directory


def is_user_file(path: str) -> bool:
    """Whether a workspace path is the user's or their code's (an upload, what a run
    wrote), not the server's own: no hidden name in it (such as `outputs/.tables/`),
    nothing of SERVER_FOLDERS, no SERVER_FILES."""
    parts = path.split("/")
    return not (
        any(part.startswith(".") for part in parts)
        or parts[0] in SERVER_FOLDERS
        or path in SERVER_FILES
    )


def listable_name(name: str) -> bool:
    """A name the API can carry: valid UTF-8, no backslash, no control characters."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes arrive as lone surrogates
        return False
    return not _UNLISTABLE.search(name)
