"""A file written beside its final name, or in the server's staging, and renamed over it.

The draft is created with O_EXCL|O_NOFOLLOW relative to an open folder, so
nothing the sandbox planted is written through, and nobody sees a half-written
file under the final name: listings skip drafts (`is_draft`). A draft that is
abandoned (a failed or cut upload) is deleted.

What the server writes into a session's workspace (uploads, Parquet copies,
cached S3 objects, the notepad) is drafted in `Staging`, a server-private folder
on the same disk (`DATA_DIR/staging/<key>/drafts`), never bound into a sandbox,
so a run never sees a draft. Each move into the workspace is announced first in
`DATA_DIR/staging/<key>/arrivals`, which the sandbox sees read-only: a run that
was going on meanwhile is judged only on what it wrote itself (`worker.py`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
import uuid
from pathlib import Path

DRAFT_PREFIX = ".draft-"
STAGING_FOLDER = "staging"
ARRIVALS = "arrivals"
RETENTION = 24 * 3600  # seconds: far past a run's time limit, and an abandoned draft's life
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def is_draft(name: str) -> bool:
    return name.startswith(DRAFT_PREFIX)


def write_all(fd: int, data: bytes) -> None:
    """All of `data` to `fd` (a single write may take only part of it)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def staging_of(workspace: Path) -> Path:
    """The server's own folder for the session whose workspace is `workspace`
    (`DATA_DIR/scratch/<key>` -> `DATA_DIR/staging/<key>`): on the same disk, outside it."""
    return workspace.parent.parent / STAGING_FOLDER / workspace.name


def arrivals_folder(workspace: Path) -> Path:
    """The record of what the server moved into `workspace`, created if missing (the
    sandbox binds it read-only, so it must exist before the sandbox starts)."""
    folder = staging_of(workspace) / ARRIVALS
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


class Staging:
    """Where the server drafts one session's files, and announces each move-in."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.root = staging_of(workspace)

    def drafts_folder(self) -> int:
        """An open descriptor of the folder drafts are written in (created if missing)."""
        folder = self.root / "drafts"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        return os.open(folder, _FOLDER_FLAGS)

    def announce(self, path: str, info: os.stat_result) -> None:
        """Record that the file `info` describes is about to become the workspace's `path`.

        Written before the rename (which keeps size and mtime), so a run that sees the
        file also finds its record. One record per path: the latest move-in is the one
        a run can see.
        """
        folder = arrivals_folder(self.workspace)
        record = {"path": path, "size": info.st_size, "mtime_ns": info.st_mtime_ns}
        name = hashlib.sha256(path.encode()).hexdigest()[:32] + ".json"
        temporary = folder / f".{uuid.uuid4().hex}"
        temporary.write_text(json.dumps(record), encoding="utf-8")
        os.replace(temporary, folder / name)
        self._prune(folder)

    def _prune(self, arrivals: Path) -> None:
        """Drop records no run can still need and drafts a killed server left behind."""
        oldest = time.time() - RETENTION
        for folder in (arrivals, self.root / "drafts"):
            with contextlib.suppress(OSError), os.scandir(folder) as entries:
                for entry in entries:
                    with contextlib.suppress(OSError):
                        if entry.stat(follow_symlinks=False).st_mtime < oldest:
                            os.unlink(entry.path)


class Draft:
    """The next version of `name` in the folder open as `directory` (the draft keeps a copy
    of that descriptor, so the caller may close its own).

    With `staging`, the draft is written there, out of the sandbox's sight, and its
    move-in is announced as the workspace path `path` (default: `name`).
    """

    def __init__(
        self, directory: int, name: str, staging: Staging | None = None, path: str | None = None
    ) -> None:
        self.name = name
        self.path = path or name
        self.staging = staging
        self.draft = f"{DRAFT_PREFIX}{uuid.uuid4().hex}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        self.directory = os.dup(directory)
        try:
            self.folder = staging.drafts_folder() if staging else os.dup(directory)
        except BaseException:
            os.close(self.directory)
            raise
        try:
            self._fd = os.open(self.draft, flags, 0o600, dir_fd=self.folder)
        except BaseException:
            os.close(self.folder)
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
            if self.staging is not None:
                self.staging.announce(self.path, os.fstat(self._fd))
            os.replace(self.draft, self.name, src_dir_fd=self.folder, dst_dir_fd=self.directory)
        except BaseException:
            self.abort()
            raise
        self._close()
        return self.size

    def abort(self) -> None:
        if self.directory < 0:
            return  # committed or aborted already
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.draft, dir_fd=self.folder)
        self._close()

    def _close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self.directory >= 0:
            os.close(self.folder)
            os.close(self.directory)
            self.directory = self.folder = -1
