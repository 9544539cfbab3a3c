"""Uploads in progress under the tus protocol: their bytes so far, and where they go.

Each upload is two files under `DATA_DIR/tus/`: `<id>.json` (owner, session, file
name, length; written once, at creation) and `<id>.part` (the bytes so far, only
ever appended to). The offset is the part's size, so after a crash or a restart
an upload resumes exactly where the disk says. A finished upload is renamed into
its session's `uploads/` (the same disk: one rename), so nothing under `tus/` is
ever listed as a session's file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from backend.storage.drafts import Draft
from backend.storage.sessions import SessionKey, check_key, valid_key
from backend.storage.workspaces import Workspaces

_ID = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class Upload:
    id: str
    user_id: int
    session_id: SessionKey  # the session's key (backend/storage/sessions.py)
    filename: str
    length: int
    created: float


class ResumableUploads:
    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "tus"
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.busy: set[str] = set()  # uploads with a PATCH in flight (this server process)

    def create(self, user_id: int, session_id: SessionKey, filename: str, length: int) -> Upload:
        upload = Upload(
            uuid.uuid4().hex, user_id, check_key(session_id), filename, length, time.time()
        )
        folder = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            draft = Draft(folder, f"{upload.id}.json")
            draft.write(json.dumps(asdict(upload)).encode())
            draft.commit(durable=True)
        finally:
            os.close(folder)
        return upload

    def get(self, upload_id: str) -> Upload | None:
        if not _ID.fullmatch(upload_id):
            return None
        try:
            upload = Upload(**json.loads((self.root / f"{upload_id}.json").read_text()))
        except (OSError, ValueError, TypeError):
            return None
        # Checked again where it becomes a path: an upload of a session that is no key (one
        # started before sessions had keys) is as unknown as a missing one.
        return upload if valid_key(upload.session_id) else None

    def remove_session(self, session_id: SessionKey) -> int:
        """Give up every unfinished upload of the session key `session_id`; returns how many."""
        removed = 0
        for info in self.root.glob("*.json"):
            upload = self.get(info.stem)
            if upload is not None and upload.session_id == session_id:
                self.delete(upload)
                removed += 1
        return removed

    def offset(self, upload: Upload) -> int:
        """How many bytes have arrived (the part's size)."""
        try:
            return self._part(upload.id).stat().st_size
        except FileNotFoundError:
            return 0

    def appender(self, upload: Upload) -> int:
        """A descriptor that appends to the upload's part; the caller closes it."""
        return os.open(self._part(upload.id), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def finish(self, upload: Upload, workspaces: Workspaces) -> None:
        """Move the complete, synced part to the session's uploads/<filename>."""
        part = self.appender(upload)  # created here if no byte ever came (an empty file)
        try:
            os.fsync(part)
        finally:
            os.close(part)
        folder = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            workspaces.adopt_upload(upload.session_id, upload.filename, folder, f"{upload.id}.part")
        finally:
            os.close(folder)
        self.delete(upload)

    def delete(self, upload: Upload) -> None:
        for path in (self.root / f"{upload.id}.json", self._part(upload.id)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def remove_expired(self, max_age: float) -> int:
        """Delete uploads started more than `max_age` seconds ago, and parts whose upload is
        gone (a crash between the two deletions); returns how many uploads went."""
        removed = 0
        for info in self.root.glob("*.json"):
            upload = self.get(info.stem)
            if upload is not None and time.time() - upload.created > max_age:
                self.delete(upload)
                removed += 1
            elif upload is None:  # unreadable, or of a session that is no key: never served
                with contextlib.suppress(FileNotFoundError):
                    info.unlink()
        for part in self.root.glob("*.part"):
            if not part.with_suffix(".json").exists():
                part.unlink(missing_ok=True)
        return removed

    def _part(self, upload_id: str) -> Path:
        return self.root / f"{upload_id}.part"
