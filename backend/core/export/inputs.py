"""What an exported session ran on: its input files (with SHA-256) and library versions."""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from typing import BinaryIO

from backend.files.catalog import DATA_FOLDER
from backend.storage.sessions import SessionKey
from backend.storage.workspaces import NotARegularFile, UnsafePath, Workspaces

# What analysis code in the sandbox imports; those installed are named in the header.
LIBRARIES = (
    "pandas",
    "numpy",
    "matplotlib",
    "seaborn",
    "scipy",
    "scikit-learn",
    "statsmodels",
    "duckdb",
    "pyarrow",
    "openpyxl",
)


@dataclass(frozen=True)
class InputFile:
    path: str
    size: int
    sha256: str


def input_files(
    workspaces: Workspaces, session_id: SessionKey, loaded: Iterable[str]
) -> list[InputFile]:
    """The session's uploads and every other file its steps loaded, hashed now (or
    earlier, unchanged since: `_digests`).

    Read by descriptor without following links, like every workspace read.
    """
    wanted = {f.path for f in workspaces.list_files(session_id) if f.path.startswith(DATA_FOLDER)}
    wanted.update(loaded)
    found = []
    for path in sorted(wanted):
        try:
            handle = workspaces.open_file(session_id, path)
        except (OSError, UnsafePath, NotARegularFile):
            continue  # gone since: the header lists what there is
        with handle:
            try:
                found.append(InputFile(path, *_digests.of(handle)))
            except OSError:
                continue
    return found


class _Digests:
    """SHA-256 of the files hashed before, by what names their contents: the inode, its
    size, and the times of its last write and change (ctime, which only the kernel sets).
    An export of a session hashed all of its inputs every time: 200 MB, a second of a
    core, for the same bytes (noisy_neighbour). A file changed within the last second is
    hashed each time: a write in the same clock tick as the hash keeps its times."""

    def __init__(self, kept: int = 4096, settled_ns: int = 1_000_000_000) -> None:
        self._kept = kept
        self._settled_ns = settled_ns
        self._digests: OrderedDict[tuple[int, ...], str] = OrderedDict()
        self._lock = threading.Lock()

    def of(self, handle: BinaryIO) -> tuple[int, str]:
        """The open file's size and SHA-256."""
        info = os.fstat(handle.fileno())
        key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
        with self._lock:
            known = self._digests.get(key)
            if known is not None:
                self._digests.move_to_end(key)
                return info.st_size, known
        digest = hashlib.sha256()
        size = 0
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)  # outside the GIL; each read takes it once
            size += len(chunk)
        settled = time.time_ns() - info.st_ctime_ns >= self._settled_ns
        if size == info.st_size and settled:
            with self._lock:
                self._digests[key] = digest.hexdigest()
                while len(self._digests) > self._kept:
                    self._digests.popitem(last=False)
        return size, digest.hexdigest()


HASH_CHUNK = 8 << 20  # few reads: each takes the GIL once; hashing and reading release it
_digests = _Digests()


@functools.cache
def library_versions() -> tuple[tuple[str, str], ...]:
    """Python's version and each installed library's, as the sandbox runs them: read once
    per process (20 ms of package metadata, holding the GIL, that every export paid)."""
    versions = [("python", platform.python_version())]
    for name in LIBRARIES:
        try:
            versions.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            continue
    return tuple(versions)
