"""How much disk each user's workspaces take, kept cheap to ask.

Every key of a user's sessions starts with `user_prefix(user_id)`, so their
workspaces are the folders `DATA_DIR/scratch/<prefix>*` (and their snapshots, the
files of OpenAI's Files API and of their evaluation sets). Walking them on every
request would cost as much as the files are many: the total is cached, uploads add
what they write, a run's end marks it stale, and it is walked again at most every
`REFRESH_SECONDS` otherwise. Sizes are blocks on disk (a sparse file costs what it
holds); links are never followed, and a hard-linked file counts once.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

from backend.storage.data_sources import SOURCES_FOLDER
from backend.storage.eval_files import EVAL_SETS_FOLDER
from backend.storage.file_blobs import FILES_FOLDER
from backend.storage.sessions import user_prefix
from backend.storage.workspaces import SNAPSHOTS_FOLDER
from backend.tools.sandbox.room import allocated

REFRESH_SECONDS = 60.0


class DiskUsage:
    def __init__(self, scratch: Path, refresh_seconds: float = REFRESH_SECONDS) -> None:
        self.scratch = scratch
        self.refresh_seconds = refresh_seconds
        self._lock = threading.Lock()
        self._bytes: dict[int, int] = {}
        self._walked: dict[int, float] = {}

    def used(self, user_id: int) -> int:
        """Bytes the user's workspaces take (walks them when stale: call off the loop)."""
        with self._lock:
            walked = self._walked.get(user_id)
            if walked is not None and time.monotonic() - walked < self.refresh_seconds:
                return self._bytes[user_id]
        return sum(self.measure(user_id).values())

    def measure(self, user_id: int) -> dict[str, int]:
        """Walk the user's folders now: bytes each takes, by its path (call off the loop)."""
        started = time.monotonic()
        sizes = _walk(self.scratch, user_prefix(user_id))
        with self._lock:
            self._bytes[user_id] = sum(sizes.values())
            self._walked[user_id] = started
        return sizes

    def add(self, user_id: int, size: int) -> None:
        """`size` more bytes were written for the user (an upload's pieces)."""
        with self._lock:
            if user_id in self._bytes:
                self._bytes[user_id] += size

    def changed(self, user_id: int) -> None:
        """Something wrote or deleted an unknown amount (a run, a deletion): walk again."""
        with self._lock:
            self._walked.pop(user_id, None)


def _walk(scratch: Path, prefix: str) -> dict[str, int]:
    """The user's workspaces, their turns' snapshots (`DATA_DIR/snapshots/<key>`) and the
    files they gave the Files API (`DATA_DIR/openai-files/u<id>-files`) and their evaluation
    sets' (`DATA_DIR/eval-sets/u<id>-<set>`) and their database files
    (`DATA_DIR/data-sources/u<id>-<source>`): the bytes of each
    (a file hard-linked from several counts in the first one walked)."""
    sizes: dict[str, int] = {}
    seen: set[tuple[int, int]] = set()
    tops = []
    roots = (SNAPSHOTS_FOLDER, FILES_FOLDER, EVAL_SETS_FOLDER, SOURCES_FOLDER)
    for root in (scratch, *(scratch.parent / folder for folder in roots)):
        with contextlib.suppress(OSError):
            tops += [entry.path for entry in os.scandir(root) if entry.name.startswith(prefix)]
    for top in tops:
        if os.path.isdir(top) and not os.path.islink(top):
            sizes[top] = allocated(top, seen)
    return sizes
