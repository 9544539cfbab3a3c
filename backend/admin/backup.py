"""`python -m backend.admin backup PATH`: a consistent copy of a serving server's data.

The database comes first (SQLite's online backup API, or `pg_dump`), then DATA_DIR's
files, so the files are never older than the database: a turn snapshot may name a
message the copy lacks (and goes unused), but every message the copy holds finds its
workspace. Variables are written by rename, so each copied one is whole; files being
written are skipped. The backup is built in PATH.partial and renamed to PATH once the
manifest is written and synced, so a backup cut off never looks complete.
"""

from __future__ import annotations

import datetime
import os
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.admin import inventory
from backend.admin.copying import TreeCopy
from backend.admin.databases import copy_sqlite, dump_postgres, sqlite_file
from backend.admin.errors import AdminError
from backend.admin.manifest import (
    DATA,
    DATABASE,
    DatabaseCopy,
    Left,
    Manifest,
    StoredFile,
    sha256_of,
    write_manifest,
)
from backend.config import Settings
from backend.storage import describe_database

SQLITE_COPY = f"{DATABASE}/app.db"
POSTGRES_DUMP = f"{DATABASE}/postgresql.dump"
_SECRET_WORDS = ("KEY", "SECRET", "PASSWORD")


@dataclass(frozen=True)
class BackupReport:
    path: Path
    database: DatabaseCopy
    files: int
    size: int
    linked: int
    skipped: Counter[str]
    left_out: list[Left]


def backup(settings: Settings, path: Path) -> BackupReport:
    data_dir = settings.DATA_DIR
    if not data_dir.is_dir():
        raise AdminError(f"DATA_DIR {data_dir} does not exist: nothing to back up")
    if path.exists():
        raise AdminError(f"{path} already exists: back up into a new path (e.g. dated)")
    if not path.parent.is_dir():
        raise AdminError(f"{path.parent} does not exist: create it first")
    partial = path.with_name(path.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)  # an earlier backup to this path that was cut off
    partial.mkdir(mode=0o700)
    try:
        report = _write(settings, partial, path)
        os.sync()  # every file on disk before the name says the backup is whole
        partial.rename(path)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return report


def _write(settings: Settings, folder: Path, final: Path) -> BackupReport:
    data_dir = settings.DATA_DIR
    database_file = sqlite_file(settings.DATABASE_URL, data_dir)
    (folder / DATABASE).mkdir(mode=0o700)
    source = describe_database(settings.DATABASE_URL, data_dir)["location"]
    files: list[StoredFile] = []
    if database_file is None:
        database = DatabaseCopy(kind="postgresql", file=POSTGRES_DUMP, source=source)
        dump_postgres(settings.DATABASE_URL, folder / POSTGRES_DUMP)
    else:
        if not database_file.is_file():
            raise AdminError(f"{database_file}: no database there (is DATA_DIR the server's?)")
        database = DatabaseCopy(kind="sqlite", file=SQLITE_COPY, source=source)
        copy_sqlite(database_file, folder / SQLITE_COPY)
    files.append(_listed(folder, database.file))

    found = inventory.survey(data_dir, database_file)
    (folder / DATA).mkdir(mode=0o700)
    for name in found.sqlite:  # the checkpoints and the search indexes, live databases too
        copied = folder / DATA / name
        copied.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        copy_sqlite(data_dir / name, copied)
        files.append(_listed(folder, f"{DATA}/{name}"))
    copier = TreeCopy(
        data_dir, folder, transient=inventory.transient, whole_lines=inventory.whole_lines
    )
    for name in found.files:
        copier.copy_file(name)
    for name in found.trees:
        copier.copy_tree(name)
    files += copier.files

    settings_kept, settings_left = _settings(settings)
    manifest = Manifest(
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        data_dir=str(data_dir.resolve()),
        database=database,
        files=files,
        folders=[DATA, *copier.folders],
        not_included=found.left_out,
        skipped=dict(sorted(copier.skipped.items())),
        settings=settings_kept,
        settings_not_included=settings_left,
    )
    write_manifest(folder, manifest)
    return BackupReport(
        path=final,
        database=database,
        files=len(files),
        size=sum(entry.size for entry in files if entry.same_as is None),
        linked=sum(1 for entry in files if entry.same_as is not None),
        skipped=copier.skipped,
        left_out=found.left_out,
    )


def _listed(folder: Path, path: str) -> StoredFile:
    """A file the backup wrote itself (a database copy), with its checksum."""
    digest, info = sha256_of(folder / path)
    return StoredFile(
        path=path, size=info.st_size, sha256=digest, mtime_ns=info.st_mtime_ns, mode=0o600
    )


def _settings(settings: Settings) -> tuple[dict[str, Any], list[Left]]:
    """The settings worth knowing on a new machine; secrets only by name, never a value."""
    kept: dict[str, Any] = {}
    left: list[Left] = []
    for name, value in settings.model_dump(mode="json").items():
        if name == "DATABASE_URL":
            left.append(Left(path=name, reason="may hold a password: see database.source"))
        elif name == "SECRET_KEY":
            left.append(Left(path=name, reason=_secret_key_note(bool(value))))
        elif any(word in name for word in _SECRET_WORDS):
            if value:
                left.append(Left(path=name, reason="a secret: set it again where this is restored"))
        else:
            kept[name] = value
    return kept, left


def _secret_key_note(configured: bool) -> str:
    if configured:
        return (
            "set in the environment, not included: give the restored server the same value, "
            "or every token and the MCP servers' sealed secrets stop working"
        )
    return f"unset: the generated key is DATA_DIR's {inventory.SECRET_KEY}, which is included"
