"""The files a user gives OpenAI's Files API: a row each (`openai_files`) and its bytes
(`FileBlobs`), the user's alone. Ids are checked where they enter; another user's id, a
deleted one and a made-up one are all "not found"."""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from starlette.concurrency import run_in_threadpool

from backend.core.disk_usage import DiskUsage
from backend.observability.metrics import UPLOAD_BYTES
from backend.storage import Store
from backend.storage.file_blobs import FileBlobs
from backend.storage.openai_objects import StoredFile, new_file_id, valid_file_id


class UserFileNotFound(LookupError):
    def __init__(self, file_id: str) -> None:
        super().__init__(file_id)
        self.file_id = file_id


class UserFiles:
    def __init__(self, store: Store, blobs: FileBlobs, disk: DiskUsage) -> None:
        self.store = store
        self.blobs = blobs
        self.disk = disk

    async def add(
        self, user_id: int, filename: str, purpose: str, source: BinaryIO, max_bytes: int
    ) -> StoredFile:
        """Store the bytes, then the row (a crash between leaves bytes no row names, which
        `remove_user` still deletes). Raises `FileTooLarge`, or OSError (a full disk)."""
        file_id = new_file_id()
        size = await run_in_threadpool(self.blobs.write, user_id, file_id, source, max_bytes)
        self.disk.add(user_id, size)
        UPLOAD_BYTES.inc(size)
        try:
            return self.store.add_file(user_id, file_id, filename, purpose, size)
        except BaseException:
            await run_in_threadpool(self.blobs.remove, user_id, file_id)
            raise

    def get(self, user_id: int, file_id: str) -> StoredFile:
        found = self.store.get_file(user_id, file_id) if valid_file_id(file_id) else None
        if found is None:
            raise UserFileNotFound(file_id)
        return found

    def of_user(self, user_id: int) -> list[StoredFile]:
        return self.store.list_files(user_id)

    def open(self, user_id: int, file_id: str) -> BinaryIO:
        """The file's bytes to read (`UserFileNotFound` if its row or bytes are gone)."""
        self.get(user_id, file_id)
        try:
            return self.blobs.open(user_id, file_id)
        except FileNotFoundError:
            raise UserFileNotFound(file_id) from None

    def chunks(self, user_id: int, file_id: str) -> Iterator[bytes]:
        """The file's bytes in pieces, opened now (`UserFileNotFound`)."""
        self.get(user_id, file_id)
        try:
            return self.blobs.chunks(user_id, file_id)
        except FileNotFoundError:
            raise UserFileNotFound(file_id) from None

    async def delete(self, user_id: int, file_id: str) -> None:
        self.get(user_id, file_id)
        self.store.delete_file(user_id, file_id)
        await run_in_threadpool(self.blobs.remove, user_id, file_id)
        self.disk.changed(user_id)

    async def remove_user(self, user_id: int) -> None:
        """The user is being deleted: every file of theirs (the rows go with the user's)."""
        await run_in_threadpool(self.blobs.remove_user, user_id)
