"""The bytes of the files users give OpenAI's Files API (`DATA_DIR/openai-files/u<id>-files/<id>`).

The folder's name starts with the user's key prefix, so the user's disk quota counts it
(`backend/core/disk_usage.py`). A file is written to a draft in the same folder and
renamed into place once complete, so a cut upload leaves nothing under its id; ids are
checked again here, where they become paths, and nothing is followed through a link.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from backend.storage.openai_objects import valid_file_id
from backend.storage.sessions import user_prefix
from backend.storage.workspaces import FileTooLarge

FILES_FOLDER = "openai-files"
CHUNK = 1024 * 1024
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


class FileBlobs:
    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / FILES_FOLDER

    def folder(self, user_id: int) -> Path:
        if isinstance(user_id, bool) or not isinstance(user_id, int) or user_id < 0:
            raise ValueError(f"user {user_id!r}")
        return self.root / f"{user_prefix(user_id)}files"

    def _path(self, user_id: int, file_id: str) -> Path:
        if not valid_file_id(file_id):
            raise FileNotFoundError(file_id)
        return self.folder(user_id) / file_id

    def write(self, user_id: int, file_id: str, source: BinaryIO, max_bytes: int) -> int:
        """Copy `source` to the file's place; its size. `FileTooLarge` past `max_bytes`,
        leaving nothing behind."""
        target = self._path(user_id, file_id)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return write_whole(target, target.with_name(f".draft-{file_id}"), source, max_bytes)

    def open(self, user_id: int, file_id: str) -> BinaryIO:
        """The file to read (`FileNotFoundError` if it is not there)."""
        fd = os.open(self._path(user_id, file_id), os.O_RDONLY | os.O_NOFOLLOW)
        return os.fdopen(fd, "rb")

    def chunks(self, user_id: int, file_id: str) -> Iterator[bytes]:
        """Its bytes in pieces; opened now, so a missing file fails before a response starts."""
        handle = self.open(user_id, file_id)

        def read() -> Iterator[bytes]:
            with handle:
                while chunk := handle.read(CHUNK):
                    yield chunk

        return read()

    def remove(self, user_id: int, file_id: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(user_id, file_id).unlink()

    def remove_user(self, user_id: int) -> None:
        shutil.rmtree(self.folder(user_id), ignore_errors=True)


def write_whole(target: Path, draft: Path, source: BinaryIO, max_bytes: int) -> int:
    """Copy `source` to `draft` (a new file, owner-only, no link followed), on disk, then
    rename it to `target`; its size. `FileTooLarge` past `max_bytes`, leaving nothing."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
    fd = os.open(draft, flags, 0o600)
    size = 0
    try:
        with os.fdopen(fd, "wb") as out:
            while chunk := source.read(CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise FileTooLarge(target.name)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(draft, target)
    except BaseException:
        draft.unlink(missing_ok=True)
        raise
    return size
