"""What an exported session ran on: its input files (with SHA-256) and library versions."""

from __future__ import annotations

import functools
import hashlib
import platform
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata

from backend.files.catalog import DATA_FOLDER
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


def input_files(workspaces: Workspaces, session_id: str, loaded: Iterable[str]) -> list[InputFile]:
    """The session's uploads and every other file its steps loaded, hashed now.

    Read by descriptor without following links, like every workspace read.
    """
    wanted = {f.path for f in workspaces.list_files(session_id) if f.path.startswith(DATA_FOLDER)}
    wanted.update(loaded)
    found = []
    for path in sorted(wanted):
        digest = hashlib.sha256()
        size = 0
        try:
            for chunk in workspaces.read_chunks(session_id, path, 1 << 20):
                digest.update(chunk)
                size += len(chunk)
        except (OSError, UnsafePath, NotARegularFile):
            continue  # gone since: the header lists what there is
        found.append(InputFile(path, size, digest.hexdigest()))
    return found


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
