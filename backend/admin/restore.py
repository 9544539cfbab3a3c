"""`python -m backend.admin restore PATH [--force]`: a backup back into an empty DATA_DIR.

Every checksum is verified before anything is written. The target must be empty: a
DATA_DIR with anything in it, a SQLite file with tables, a PostgreSQL database with
tables. `--force` restores anyway, and nothing is deleted: DATA_DIR's old entries
move into `DATA_DIR/.before-restore-<time>`, an old SQLite file outside DATA_DIR
beside itself, and PostgreSQL's tables are replaced by `pg_restore --clean`. The
files are written into a folder inside DATA_DIR and moved into place at the end (a
rename on the same disk, which also works when DATA_DIR is a mount point).

The copy is not the server it came from: it gets a server id of its own when it
starts, and the turns that were running when the backup was taken are marked
interrupted here, since no server will ever finish them.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from backend.admin.databases import (
    interrupt_running_turns,
    postgres_tables,
    restore_postgres,
    sqlite_file,
    sqlite_is_empty,
)
from backend.admin.errors import AdminError
from backend.admin.inventory import SQLITE_SIDE_FILES
from backend.admin.manifest import DATA, Manifest, read_manifest, verify
from backend.config import Settings
from backend.storage import is_postgres, open_store
from backend.storage.sparse_copy import copy_sparse

STAGING = ".restoring"
ASIDE = ".before-restore-"


@dataclass
class RestoreReport:
    manifest: Manifest
    checked_bytes: int
    files: int = 0
    interrupted: int = 0
    moved_aside: list[Path] = field(default_factory=list)


def restore(settings: Settings, path: Path, *, force: bool) -> RestoreReport:
    manifest = read_manifest(path)
    url, data_dir = settings.DATABASE_URL, settings.DATA_DIR
    kind = "postgresql" if is_postgres(url) else "sqlite"
    if manifest.database.kind != kind:
        raise AdminError(
            f"the backup holds a {manifest.database.kind} database and DATABASE_URL names "
            f"{kind}: restore into the same kind (then `python -m backend.storage.migrate` "
            "copies SQLite into PostgreSQL)"
        )
    report = RestoreReport(manifest, verify(path, manifest))
    database_file = sqlite_file(url, data_dir)
    outside = database_file is not None and not _inside(database_file, data_dir)
    _check_empty(data_dir, database_file if outside else None, url, force=force)

    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    staging = data_dir / STAGING
    shutil.rmtree(staging, ignore_errors=True)  # a restore that was cut off
    staging.mkdir(mode=0o700)
    database_draft = _database_draft(database_file, staging, outside=outside)
    try:
        report.files = _copy_files(path, manifest, staging)
        if database_draft is not None:
            database_draft.parent.mkdir(parents=True, exist_ok=True)
            database_draft.unlink(missing_ok=True)
            _copy_file(path / manifest.database.file, database_draft)
        else:
            restore_postgres(url, path / manifest.database.file, replace=force)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        if outside and database_draft is not None:
            database_draft.unlink(missing_ok=True)
        raise

    report.moved_aside += _move_aside(data_dir, data_dir / f"{ASIDE}{stamp}")
    if database_file is not None and database_draft is not None and outside:
        report.moved_aside += _move_database_aside(database_file, stamp)
        os.replace(database_draft, database_file)
    for entry in sorted(os.listdir(staging)):
        os.rename(staging / entry, data_dir / entry)
    staging.rmdir()
    data_dir.chmod(0o700)

    store = open_store(url, data_dir)
    try:
        report.interrupted = interrupt_running_turns(store)
    finally:
        store.close()
    return report


def _database_draft(database_file: Path | None, staging: Path, *, outside: bool) -> Path | None:
    """Where the SQLite copy is written first: beside its final place, so that moving it
    there is a rename on the same disk (None: PostgreSQL, which pg_restore fills)."""
    if database_file is None:
        return None
    if outside:
        return database_file.with_name(database_file.name + STAGING)
    return staging / database_file.name


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().parent == folder.resolve()


def _check_empty(data_dir: Path, database_file: Path | None, url: str, *, force: bool) -> None:
    """Refuse a target that holds anything, unless `force`; every problem in one message."""
    problems = []
    if data_dir.exists() and any(name != STAGING for name in os.listdir(data_dir)):
        problems.append(f"DATA_DIR {data_dir} is not empty")
    if database_file is not None and not sqlite_is_empty(database_file):
        problems.append(f"the database {database_file} has tables")
    if database_file is None and is_postgres(url) and (tables := postgres_tables(url)):
        problems.append(f"the PostgreSQL database has {tables} table(s)")
    if problems and not force:
        raise AdminError(
            "; ".join(problems) + ": restore into an empty one, or pass --force to replace "
            "it (DATA_DIR's entries are moved aside, PostgreSQL's tables are dropped)"
        )


def _copy_files(backup: Path, manifest: Manifest, staging: Path) -> int:
    """DATA_DIR's files from the backup, with their modes and mtimes (the turn snapshots
    and the search indexes compare mtimes) and their hard links."""
    prefix = f"{DATA}/"
    for folder in sorted(manifest.folders, key=lambda name: name.count("/")):
        if folder.startswith(prefix):
            (staging / folder.removeprefix(prefix)).mkdir(mode=0o700, parents=True, exist_ok=True)
    copied = 0
    for entry in manifest.files:
        if not entry.path.startswith(prefix):
            continue  # the database, restored on its own
        target = staging / entry.path.removeprefix(prefix)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if entry.same_as is not None:
            with contextlib.suppress(OSError):
                os.link(staging / entry.same_as.removeprefix(prefix), target)
                copied += 1
                continue
        _copy_file(backup / entry.path, target)
        os.chmod(target, entry.mode & 0o777)
        os.utime(target, ns=(entry.mtime_ns, entry.mtime_ns))
        copied += 1
    return copied


def _copy_file(source: Path, target: Path) -> None:
    """`source` into the new `target`, its holes left holes (`sparse_copy.py`)."""
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        out = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            copy_sparse(fd, out, os.fstat(fd).st_size)
        finally:
            os.close(out)
    finally:
        os.close(fd)


def _move_aside(data_dir: Path, aside: Path) -> list[Path]:
    """DATA_DIR's old entries into `aside` (only with --force: otherwise there are none)."""
    entries = [name for name in sorted(os.listdir(data_dir)) if name != STAGING]
    if not entries:
        return []
    aside.mkdir(mode=0o700)
    for name in entries:
        os.rename(data_dir / name, aside / name)
    return [aside]


def _move_database_aside(database_file: Path, stamp: str) -> list[Path]:
    """An old SQLite file outside DATA_DIR, and its WAL, renamed beside it."""
    moved = []
    for suffix in ("", *SQLITE_SIDE_FILES):
        old = database_file.with_name(database_file.name + suffix)
        if old.exists():
            aside = old.with_name(f"{old.name}{ASIDE}{stamp}")
            os.rename(old, aside)
            moved.append(aside)
    return moved
