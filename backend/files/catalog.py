"""The session's data files and their metadata, cached by size and modification time.

Metadata extraction reads only the start (or the footer) of each file, but a
session with twenty files is asked about on every question, so results are
kept per (session, path, size, mtime). Files are opened through `Workspaces`,
which never follows a link the sandbox planted, and parsed in an isolated,
resource-limited helper process (`files/isolation.py`) that gets only the open
file, since a crafted file can crash or take over a native parser.

A large table's Parquet copy (`conversion.py`) is not listed as a file of its
own: it shows in its source's `details.conversion`, and once it is complete the
source is described from the copy's footer (exact rows and types).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import replace
from typing import BinaryIO

from starlette.concurrency import run_in_threadpool

from backend.files import FileMetadata, UnsupportedFileType
from backend.files.conversion import (
    Conversion,
    ParquetConversions,
    source_of_twin,
    twin_of,
)
from backend.files.isolation import IsolatedCallFailed, IsolatedRunner
from backend.files.s3_source import S3Source
from backend.storage.s3_objects import S3Error, S3Forbidden, is_s3
from backend.storage.sessions import SessionKey
from backend.storage.workspaces import (
    SUPPORTED_EXTENSIONS,
    NotARegularFile,
    UnsafePath,
    WorkspaceFile,
    Workspaces,
    safe_relative,
)

logger = logging.getLogger(__name__)

DATA_FOLDER = "uploads/"
_CACHED = 1024

_Key = tuple[str, str, int, float]


class FileNotInWorkspace(LookupError):
    """No such file in the session's workspace."""


class WorkspaceCatalog:
    def __init__(
        self,
        workspaces: Workspaces,
        runner: IsolatedRunner | None = None,
        conversions: ParquetConversions | None = None,
        s3: S3Source | None = None,
    ) -> None:
        self.workspaces = workspaces
        self.runner = runner or IsolatedRunner()
        self.conversions = conversions
        self.s3 = s3
        self._cache: OrderedDict[_Key, FileMetadata] = OrderedDict()
        self._lock = threading.Lock()  # requests read metadata from several threads

    async def data_files(
        self, session_id: SessionKey, *, include_s3: bool = True, strict: bool = False
    ) -> list[FileMetadata]:
        """Metadata of every supported file under uploads/, in name order, then of the
        allowlisted S3 objects. An S3 failure raises `S3Error` when `strict`; otherwise
        it is logged and the uploads alone are listed."""
        uploads = await run_in_threadpool(self._data_files, session_id)
        if self.s3 is None or not include_s3:
            return uploads
        try:
            return uploads + await run_in_threadpool(self.s3.files)
        except S3Error as exc:
            if strict:
                raise
            logger.warning("S3 objects not listed: %s", exc)
            return uploads

    async def info(self, session_id: SessionKey, name: str) -> FileMetadata:
        """One file's metadata; `name` may omit the uploads/ prefix, or be `s3://bucket/key`.

        Raises `FileNotInWorkspace`, `UnsupportedFileType`, `UnsafePath` or `S3Error`.
        """
        if is_s3(name):
            return await run_in_threadpool(self._s3_source(name).info, name)
        return await run_in_threadpool(self._info, session_id, name)

    async def usable(self, session_id: SessionKey, name: str) -> FileMetadata:
        """Like `info`, for a file code is about to open: an S3 object is copied into the
        workspace first (`s3/<bucket>/<key>`), and its metadata names that copy, with the
        object's name as `details.source`."""
        if not is_s3(name):
            return await self.info(session_id, name)
        path = await run_in_threadpool(self._s3_source(name).copy, session_id, name)
        metadata = await run_in_threadpool(self._info, session_id, path)
        return replace(metadata, details={**metadata.details, "source": name})

    def _s3_source(self, name: str) -> S3Source:
        if self.s3 is None:
            raise S3Forbidden(f"{name}: S3 sources are off (set S3_BUCKETS to allow some)")
        return self.s3

    def resolve(self, session_id: SessionKey, name: str) -> WorkspaceFile:
        return _find(name, self._listed(session_id))

    def _listed(self, session_id: SessionKey) -> dict[str, WorkspaceFile]:
        return {f.path: f for f in self.workspaces.list_files(session_id)}

    def _data_files(self, session_id: SessionKey) -> list[FileMetadata]:
        listed = self._listed(session_id)
        found = []
        for entry in listed.values():
            if (
                entry.path.startswith(DATA_FOLDER)
                and _extension(entry.path) in SUPPORTED_EXTENSIONS
                and source_of_twin(entry.path, listed) is None
            ):
                try:
                    found.append(self._described(session_id, entry, listed))
                except (OSError, NotARegularFile, UnsafePath):  # the sandbox swapped it meanwhile
                    continue
        return found

    def _info(self, session_id: SessionKey, name: str) -> FileMetadata:
        listed = self._listed(session_id)
        found = _find(name, listed)
        extension = _extension(found.path)
        if extension not in SUPPORTED_EXTENSIONS:
            raise UnsupportedFileType(found.path, extension)
        return self._described(session_id, found, listed)

    def _described(
        self, session_id: SessionKey, found: WorkspaceFile, listed: dict[str, WorkspaceFile]
    ) -> FileMetadata:
        """`found`'s metadata, with its Parquet copy's status (and facts, once complete)."""
        metadata = self._metadata(session_id, found)
        if self.conversions is None:
            return metadata
        twin = listed.get(twin_of(found.path))
        conversion = self.conversions.status(session_id, found, twin)
        if conversion is None:
            return metadata
        if conversion.state == "done" and twin is not None:
            copy = self._metadata(session_id, twin)
            if copy.error is None:
                return _from_copy(metadata, copy, conversion)
        details = {**metadata.details, "conversion": conversion.public()}
        return replace(metadata, details=details)

    def _metadata(self, session_id: SessionKey, found: WorkspaceFile) -> FileMetadata:
        key = (session_id, found.path, found.size, found.modified)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        try:
            with self.workspaces.open_file(session_id, found.path) as handle:
                metadata = self.runner.call(describe_open_file, found.path, found.size, file=handle)
        except IsolatedCallFailed as exc:
            metadata = FileMetadata(
                name=found.path,
                extension=_extension(found.path),
                size=found.size,
                kind="data",
                summary="unreadable",
                error=str(exc),
            )
        with self._lock:
            self._cache[key] = metadata
            if len(self._cache) > _CACHED:
                self._cache.popitem(last=False)
        return metadata


def _find(name: str, listed: dict[str, WorkspaceFile]) -> WorkspaceFile:
    safe_relative(name)
    for candidate in (name, DATA_FOLDER + name):
        if candidate in listed:
            return listed[candidate]
    raise FileNotInWorkspace(name)


def _from_copy(source: FileMetadata, copy: FileMetadata, conversion: Conversion) -> FileMetadata:
    """The source described by its Parquet copy's footer: exact columns, types and rows."""
    rows = copy.details.get("rows")
    columns = copy.details.get("column_count", 0)
    shown = f"{rows:,} rows" if isinstance(rows, int) else "rows unknown"
    details = {
        **copy.details,
        "read_options": source.details.get("read_options", {}),
        "parquet": copy.name,
        "conversion": conversion.public(),
    }
    summary = f"{source.extension.upper()} table, {columns} columns, {shown} (Parquet copy ready)"
    return replace(source, summary=summary, details=details, error=None)


def describe_open_file(handle: BinaryIO, path: str, size: int) -> FileMetadata:
    """In the isolated helper: describe the file the server opened (no link followed)."""
    # The readers' libraries (pandas, Arrow, HDF5, PDF, ...) load in the helper only.
    from backend.files.metadata import extract_file_metadata

    return extract_file_metadata(path, handle, size)


def _extension(path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    return name.rsplit(".", 1)[-1].lower() if "." in name else ""
