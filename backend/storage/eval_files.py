"""The files of a user's evaluation sets: `DATA_DIR/eval-sets/u<user id>-<set id>/<name>`.

The folder's name starts with the user's prefix, so the user's disk usage counts it
(backend/core/disk_usage.py). Set ids and file names are checked here again, whoever
the caller; links are never followed, and a file is renamed into place only once whole.
The starter set's files are the server's own, written once into `starter-<version>/`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import BinaryIO

from backend.storage.file_blobs import write_whole
from backend.storage.sessions import user_prefix
from backend.storage.workspaces import UnsafePath, safe_filename

EVAL_SETS_FOLDER = "eval-sets"
SET_ID = re.compile(r"^es_[0-9a-f]{32}$")


class EvalSetFiles:
    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / EVAL_SETS_FOLDER

    def folder(self, user_id: int, set_id: str) -> Path:
        if isinstance(user_id, bool) or not isinstance(user_id, int) or user_id < 0:
            raise UnsafePath(repr(user_id))
        if not isinstance(set_id, str) or SET_ID.fullmatch(set_id) is None:
            raise UnsafePath(repr(set_id)[:80])
        return self.root / f"{user_prefix(user_id)}{set_id}"

    def starter_folder(self, version: str) -> Path:
        if re.fullmatch(r"[0-9]{1,4}", version) is None:
            raise UnsafePath(version)
        return self.root / f"starter-{version}"

    def write(self, folder: Path, name: str, source: BinaryIO, max_bytes: int) -> int:
        """Copy `source` to `folder/<name>` (created, owner-only); returns its size.
        `FileTooLarge` past `max_bytes`, leaving nothing behind."""
        filename = safe_filename(name)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        draft = folder / f".draft-{uuid.uuid4().hex}"
        return write_whole(folder / filename, draft, source, max_bytes)

    def open(self, folder: Path, name: str) -> BinaryIO:
        """`folder/<name>` to read; no link is followed (`FileNotFoundError`, `UnsafePath`)."""
        filename = safe_filename(name)
        try:
            fd = os.open(folder / filename, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as exc:
            raise FileNotFoundError(filename) from exc
        return os.fdopen(fd, "rb")

    def size(self, folder: Path, name: str) -> int:
        return os.stat(folder / safe_filename(name), follow_symlinks=False).st_size

    def remove(self, user_id: int, set_id: str) -> None:
        shutil.rmtree(self.folder(user_id, set_id), ignore_errors=True)

    def remove_user(self, user_id: int) -> None:
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.root):
                if entry.name.startswith(user_prefix(user_id)):
                    shutil.rmtree(entry.path, ignore_errors=True)
