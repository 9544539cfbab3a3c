"""The most a session's workspace may hold while a run goes on: the server's side.

The limit is a number of allocated bytes in `DATA_DIR/staging/<key>/room/limit`, a folder
the sandbox sees read-only (`backend/tools/sandbox/room.py` reads it and stops the run
past it). It is replaced whole (a draft renamed over it), so the worker never reads half
of one; no file means no limit.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from backend.storage.drafts import staging_of

ROOM = "room"
LIMIT_FILE = "limit"  # the sandbox's room.LIMIT_FILE


def room_folder(workspace: Path) -> Path:
    """The session's room folder, created if missing (the sandbox binds it read-only,
    so it must exist before the sandbox starts)."""
    folder = staging_of(workspace) / ROOM
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def set_limit(workspace: Path, limit: int | None) -> None:
    """The most `workspace` may hold from now on (`None`: no limit)."""
    folder = room_folder(workspace)
    if limit is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(folder / LIMIT_FILE)
        return
    draft = folder / f".{LIMIT_FILE}-{os.getpid()}"
    draft.write_text(str(max(limit, 0)))
    os.replace(draft, folder / LIMIT_FILE)
