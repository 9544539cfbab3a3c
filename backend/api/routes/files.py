"""Session workspaces: list their files, describe them, unpack archives, download them.

Getting files in is `uploads.py`.
"""

from __future__ import annotations

import contextlib
import mimetypes
import os
from dataclasses import replace
from typing import Annotated, Literal

from fastapi import APIRouter, Query, status
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from backend.api.deps import (
    CatalogDep,
    CurrentSession,
    CurrentUser,
    SharedDep,
    StoreDep,
    WorkspacesDep,
    current_session,
)
from backend.api.downloads import download_headers
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.api.streamed import ClosingStreamingResponse
from backend.files import ArchiveLimits, safe_extract_at
from backend.files.archive_checks import EXTRACT_LIMITS
from backend.files.catalog import FileNotInWorkspace
from backend.models.common import SessionId
from backend.models.tools import (
    ExtractedArchive,
    ExtractRequest,
    FileInfoPublic,
    WorkspaceFilePublic,
)
from backend.storage.s3_objects import is_s3
from backend.storage.sessions import SessionKey
from backend.storage.snapshots import open_kept
from backend.storage.workspaces import (
    DISK_FLOOR,
    NotARegularFile,
    UnsafePath,
    Workspaces,
    is_user_file,
)
from backend.tools.sandbox.variables import MAX_WORKSPACE_FILES

router = APIRouter(prefix="/api", tags=["files"], responses=CLIENT_ERRORS)

_MAX_EXTRACTED_FILES = MAX_WORKSPACE_FILES // 5  # one archive may not use up the budget

_INLINE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")


@router.get("/files")
async def read_data_files(
    session_id: Annotated[SessionId, Query()],
    user: CurrentUser,
    store: StoreDep,
    shared: SharedDep,
    catalog: CatalogDep,
    source: Annotated[Literal["all", "uploads", "s3"], Query()] = "all",
) -> list[FileInfoPublic]:
    """The session's uploaded data files, then the allowlisted S3 objects, with their metadata
    (seed 002's get_available_files); an S3 failure is a 502 or 503 naming the endpoint."""
    key = await current_session(store, shared, user, session_id)
    files = await catalog.data_files(key, include_s3=source != "uploads", strict=True)
    if source == "s3":
        files = [f for f in files if is_s3(f.name)]
    return [FileInfoPublic(**f.to_dict()) for f in files]


@router.get("/files/info")
async def read_file_info(
    session_id: Annotated[SessionId, Query()],
    name: Annotated[str, Query(min_length=1, max_length=1000)],
    user: CurrentUser,
    store: StoreDep,
    shared: SharedDep,
    catalog: CatalogDep,
) -> FileInfoPublic:
    """One file's metadata, read without loading the whole file (seed 002's get_file_info);
    `name` may be `s3://bucket/key` under S3_BUCKETS (read by ranged requests)."""
    key = await current_session(store, shared, user, session_id)
    try:
        metadata = await catalog.info(key, name)
    except UnsafePath:
        raise ApiError(400, "Invalid file path.", code="bad_path") from None
    except (FileNotInWorkspace, NotARegularFile):
        raise ApiError(404, f"File not found: {name}", code="file_not_found") from None
    return FileInfoPublic(**metadata.to_dict())


@router.post("/files/extract", status_code=status.HTTP_201_CREATED)
async def extract_archive(
    body: ExtractRequest,
    user: CurrentUser,
    store: StoreDep,
    shared: SharedDep,
    catalog: CatalogDep,
    workspaces: WorkspacesDep,
) -> ExtractedArchive:
    """Unpack an uploaded archive into a new folder beside it, refusing anything unsafe."""
    key = await current_session(store, shared, user, body.session_id)
    try:
        found = catalog.resolve(key, body.name)
    except UnsafePath:
        raise ApiError(400, "Invalid file path.", code="bad_path") from None
    except FileNotInWorkspace:
        raise ApiError(404, f"File not found: {body.name}", code="file_not_found") from None
    folder = _archive_folder(found.path)
    if folder is None:
        raise ApiError(415, f"{found.path} is not a zip, tar, gz or bz2 archive.")
    try:
        files = await run_in_threadpool(_extract, workspaces, key, found.path, folder)
    except FileExistsError:
        raise ApiError(409, f"{folder} already exists.", code="exists") from None
    except (NotARegularFile, OSError):
        raise ApiError(
            409, "The session's uploads folder is not usable.", code="bad_workspace"
        ) from None
    await shared.push(key)
    return ExtractedArchive(folder=folder, files=[f"{folder}/{name}" for name in files])


def _archive_folder(path: str) -> str | None:
    """uploads/data.tar.gz -> uploads/data; None if `path` is not an archive."""
    for suffix in (".tar.gz", ".tar.bz2", ".tgz", ".zip", ".tar", ".gz", ".bz2"):
        if path.lower().endswith(suffix) and len(path) > len(suffix):
            return path[: -len(suffix)].rstrip(".") or None
    return None


def _extract(
    workspaces: Workspaces, session_id: SessionKey, archive: str, folder: str
) -> list[str]:
    with workspaces.open_file(session_id, archive) as source:
        root = workspaces.new_folder(session_id, folder)
        try:
            return safe_extract_at(source, archive, root, _extract_limits(root))
        except BaseException:
            _remove_empty(root, folder.rsplit("/", 1)[-1])  # so a retry is not refused
            raise
        finally:
            os.close(root)


def _extract_limits(folder: int) -> ArchiveLimits:
    """What one extraction may write: a share of the workspace's file budget, and only
    the disk space above the floor the sandbox keeps free."""
    disk = os.statvfs(folder)
    free = disk.f_bavail * disk.f_frsize - DISK_FLOOR
    return replace(
        EXTRACT_LIMITS,
        max_members=_MAX_EXTRACTED_FILES,
        max_total_bytes=max(0, min(EXTRACT_LIMITS.max_total_bytes, free)),
    )


def _remove_empty(folder: int, name: str) -> None:
    with contextlib.suppress(OSError):
        parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=folder)
        try:
            os.rmdir(name, dir_fd=parent)
        finally:
            os.close(parent)


@router.get("/sessions/{session_id}/files")
async def read_session_files(
    key: CurrentSession, workspaces: WorkspacesDep
) -> list[WorkspaceFilePublic]:
    """The session's files: uploads and what its code wrote, not the server's own (hidden
    names, such as the tables /tables pages, the persisted variables, the run scripts,
    the notepad); each can still be downloaded by its path."""
    files = await run_in_threadpool(workspaces.list_files, key)
    return [
        WorkspaceFilePublic(path=f.path, size=f.size, modified=f.modified)
        for f in files
        if is_user_file(f.path)
    ]


_ANY_FILE: dict[str, dict[str, object]] = {"*/*": {}}  # typed by its extension


@router.get(
    "/sessions/{session_id}/files/{path:path}",
    response_class=StreamingResponse,
    responses={200: {"description": "The file's bytes.", "content": _ANY_FILE}},
)
async def read_session_file(
    key: CurrentSession, path: str, workspaces: WorkspacesDep
) -> StreamingResponse:
    """Download one workspace file; links and special files are refused."""
    try:
        # A plot of a turn on another branch is served from the snapshot that kept it.
        chunks = workspaces.read_chunks(key, path, opened=open_kept(workspaces, key, path))
    except UnsafePath:
        raise ApiError(400, "Invalid file path.", code="bad_path") from None
    except (NotARegularFile, FileNotFoundError):
        raise ApiError(404, "File not found.", code="file_not_found") from None
    media_type = mimetypes.guess_type(path)[0] or "application/octet-stream"
    disposition = "inline" if media_type in _INLINE_TYPES else "attachment"
    headers = download_headers(path.rsplit("/", 1)[-1], disposition)
    return ClosingStreamingResponse(chunks, media_type=media_type, headers=headers)
