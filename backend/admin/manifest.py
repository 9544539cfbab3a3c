"""`manifest.json`: what a backup holds, each file's SHA-256, and what it left out.

A backup is a folder: `data/` holds DATA_DIR's files under their own relative paths,
`database/` the database (a SQLite copy or a `pg_dump` archive), and the manifest
lists every file with its size, checksum, mode and mtime. A file that was a hard link
of an earlier one (turn snapshots share unchanged files) names it in `same_as`.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ValidationError, field_validator

from backend.admin.errors import AdminError

MANIFEST = "manifest.json"
DATA = "data"  # DATA_DIR's files, under their relative paths
DATABASE = "database"  # the database's copy or dump
CHUNK = 1024 * 1024
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY


def _inside(path: str) -> str:
    """A relative path under `data/` or `database/`, or a ValueError: a manifest names
    where restore writes, so it may never point out of the target."""
    parts = PurePosixPath(path).parts
    if (
        not path
        or "\\" in path
        or "\x00" in path
        or path.startswith("/")
        or any(part in ("", ".", "..") for part in parts)
        or parts[0] not in (DATA, DATABASE)
        or "/".join(parts) != path
    ):
        raise ValueError(f"{path!r} is not a path inside the backup")
    return path


class StoredFile(BaseModel):
    path: str  # in the backup, e.g. data/scratch/u1-s/variables/v.json
    size: int
    sha256: str
    mtime_ns: int
    mode: int
    same_as: str | None = None  # a hard link of this earlier file in DATA_DIR, and here

    @field_validator("path", "same_as")
    @classmethod
    def _safe(cls, value: str | None) -> str | None:
        return None if value is None else _inside(value)


class DatabaseCopy(BaseModel):
    kind: Literal["sqlite", "postgresql"]
    file: str  # in the backup: database/app.db or database/postgresql.dump
    source: str  # where it was read, never with a password

    @field_validator("file")
    @classmethod
    def _safe(cls, value: str) -> str:
        return _inside(value)


class Left(BaseModel):
    """Something not in the backup, and why."""

    path: str
    reason: str


class Manifest(BaseModel):
    format: Literal[1] = 1
    created: str  # ISO 8601, UTC
    data_dir: str
    database: DatabaseCopy
    files: list[StoredFile]
    folders: list[str]  # in the backup, so that empty ones come back too
    not_included: list[Left]
    skipped: dict[str, int] = {}  # files left out one by one (links, drafts), counted
    settings: dict[str, Any]  # the server's settings, less its secrets
    settings_not_included: list[Left]

    @field_validator("folders")
    @classmethod
    def _safe_folders(cls, folders: list[str]) -> list[str]:
        return [_inside(folder) for folder in folders]


def write_manifest(folder: Path, manifest: Manifest) -> None:
    path = folder / MANIFEST
    with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
        handle.write(manifest.model_dump_json(indent=1))
        handle.flush()
        os.fsync(handle.fileno())


def read_manifest(folder: Path) -> Manifest:
    path = folder / MANIFEST
    if not folder.is_dir():
        cut = folder.with_name(folder.name + ".partial")
        hint = f" ({cut} is a backup that was cut off)" if cut.exists() else ""
        raise AdminError(f"{folder}: no such backup folder{hint}")
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise AdminError(f"{folder} has no {MANIFEST}: not a backup, or not a whole one") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise AdminError(f"{path} cannot be read: {exc}") from None
    try:
        return Manifest.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        problem = f"{where}: {first['msg']}"
        raise AdminError(f"{path} is not a valid backup manifest: {problem}") from None


def sha256_of(path: Path) -> tuple[str, os.stat_result]:
    """The regular file's checksum and status, read without following a link."""
    fd = os.open(path, _READ)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        digest = hashlib.sha256()
        while chunk := os.read(fd, CHUNK):
            digest.update(chunk)
        return digest.hexdigest(), info
    finally:
        os.close(fd)


def verify(folder: Path, manifest: Manifest) -> int:
    """Check every file against its size and checksum; bytes checked. Each problem is
    named (up to a few), so a damaged backup is refused before anything is written."""
    problems: list[str] = []
    checked: dict[str, os.stat_result] = {}
    total = 0
    for entry in manifest.files:
        path = folder / entry.path
        earlier = checked.get(entry.same_as) if entry.same_as else None
        try:
            here = os.stat(path, follow_symlinks=False) if earlier is not None else None
            if earlier is not None and here is not None and os.path.samestat(earlier, here):
                continue  # the same inode, already checked
            digest, info = sha256_of(path)
        except OSError as exc:
            problems.append(f"{entry.path}: missing or unreadable ({exc.strerror or exc})")
            continue
        checked[entry.path] = info
        total += info.st_size
        if info.st_size != entry.size or digest != entry.sha256:
            problems.append(f"{entry.path}: checksum mismatch (damaged, or changed since)")
    database = manifest.database.file
    if not any(entry.path == database for entry in manifest.files):
        problems.append(f"{database}: the database is not listed in the manifest")
    if problems:
        shown = "\n  ".join(problems[:10])
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise AdminError(
            f"{folder} is damaged, nothing was restored; {len(problems)} problem(s):"
            f"\n  {shown}{more}"
        )
    return total
