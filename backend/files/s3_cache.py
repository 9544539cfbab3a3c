"""S3 objects copied into a session's workspace, once per ETag.

The sandbox has no network, so code reads an S3 object from its copy at
`s3/<bucket>/<key>` in the workspace. The server streams it there in pieces
(never whole in memory) to a draft that is renamed into place once complete and
on disk, under `MAX_UPLOAD_SIZE_MB` and above the disk floor. What each copy
was made from (ETag, size, mtime) is kept outside the workspace, in
`DATA_DIR/s3cache/<session>.json`: a copy is used again while the object's ETag
and the copy itself are unchanged, and fetched again otherwise.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from pathlib import Path
from typing import Any

from backend.storage.drafts import Draft
from backend.storage.s3_objects import (
    S3Config,
    S3Location,
    S3NoRoom,
    S3Object,
    S3TooLarge,
    client,
    head,
    translated,
)
from backend.storage.sessions import SessionKey
from backend.storage.workspaces import NotARegularFile, WorkspaceFile, Workspaces

PIECE = 4 * 1024 * 1024


class S3Cache:
    def __init__(self, config: S3Config, workspaces: Workspaces, max_bytes: int) -> None:
        self.config = config
        self.workspaces = workspaces
        self.max_bytes = max_bytes
        self.folder = workspaces.root.parent / "s3cache"
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def fetch(self, session_id: SessionKey, location: S3Location) -> str:
        """The workspace path of the object's current copy, downloaded if needed."""
        with self._guard:  # one download per copy at a time
            lock = self._locks.setdefault((session_id, location.cached_path), threading.Lock())
        with lock:
            current = head(self.config, location)
            known = self._manifest(session_id).get(location.cached_path)
            copy = self._listed(session_id, location.cached_path)
            if known is not None and copy is not None and known == _record(current, copy):
                return location.cached_path
            if current.size > self.max_bytes:
                mb = self.max_bytes / 1024**2
                raise S3TooLarge(f"{location.name} is larger than {mb:g} MB (MAX_UPLOAD_SIZE_MB)")
            room = self.workspaces.room(session_id)
            if current.size > room:
                raise S3NoRoom(
                    f"{location.name} ({current.size:,} bytes) does not fit on the server's disk"
                )
            self._download(session_id, current)
            copy = self._listed(session_id, location.cached_path)
            if copy is not None:
                self._remember(session_id, location.cached_path, _record(current, copy))
        return location.cached_path

    def _download(self, session_id: SessionKey, found: S3Object) -> None:
        location = found.location
        draft = self.workspaces.draft(session_id, location.cached_path, create=True)
        try:
            same = {"IfMatch": found.etag} if found.etag else {}
            try:
                body = client(self.config).get_object(
                    Bucket=location.bucket, Key=location.key, **same
                )["Body"]
                pieces = body.iter_chunks(PIECE)
                for piece in pieces:
                    if draft.size + len(piece) > found.size:
                        raise S3TooLarge(f"{location.name} grew while it was being read")
                    _write(draft, piece, location.name)
            except (S3TooLarge, S3NoRoom):
                raise
            except Exception as exc:
                raise translated(exc, self.config, location.name) from None
            if draft.size != found.size:
                raise translated(ConnectionResetError(), self.config, location.name)
            draft.commit(durable=True)
        except BaseException:
            draft.abort()
            raise

    def _listed(self, session_id: SessionKey, path: str) -> WorkspaceFile | None:
        try:
            with self.workspaces.open_file(session_id, path) as handle:
                info = os.fstat(handle.fileno())
        except (OSError, NotARegularFile):  # missing, or the sandbox replaced it
            return None
        return WorkspaceFile(path, info.st_size, info.st_mtime)

    def _manifest_path(self, session_id: SessionKey) -> Path:
        return self.folder / f"{session_id}.json"

    def _manifest(self, session_id: SessionKey) -> dict[str, Any]:
        try:
            value = json.loads(self._manifest_path(session_id).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def _remember(self, session_id: SessionKey, path: str, record: dict[str, Any]) -> None:
        manifest = {**self._manifest(session_id), path: record}
        self.folder.mkdir(mode=0o700, exist_ok=True)
        target = self._manifest_path(session_id)
        draft = target.with_suffix(".tmp")
        draft.write_text(json.dumps(manifest), encoding="utf-8")
        os.replace(draft, target)


def _write(draft: Draft, piece: bytes, name: str) -> None:
    try:
        draft.write(piece)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT):
            raise S3NoRoom(f"{name} does not fit on the server's disk") from None
        raise


def _record(found: S3Object, copy: WorkspaceFile) -> dict[str, Any]:
    return {"etag": found.etag, "size": copy.size, "modified": copy.modified}
