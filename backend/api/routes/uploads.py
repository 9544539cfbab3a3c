"""Getting files into a session's workspace: a form upload, or a raw body streamed to disk.

`PUT /api/sessions/{session_id}/uploads/{name}` is for large files: the body goes
to a draft beside `uploads/<name>` as it arrives (never held in memory), under
`MAX_UPLOAD_SIZE_MB` and above the disk floor, and is renamed into place only
once it is complete and on disk. A cut or refused upload leaves nothing behind.
"""

from __future__ import annotations

import errno
import re
from typing import Annotated

from fastapi import APIRouter, File, Form, Request, UploadFile, status
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from backend.api.bodies import MEGABYTE, UploadQuota, no_room, write_body
from backend.api.deps import (
    CatalogDep,
    CurrentUser,
    LimitsDep,
    SettingsDep,
    SharedDep,
    StoreDep,
    WorkspacesDep,
    opened_session,
)
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.api.upload_checks import checked_name, too_large, unusable
from backend.files import UnsupportedFileType
from backend.files.catalog import FileNotInWorkspace, WorkspaceCatalog
from backend.models.common import SessionId
from backend.models.tools import UploadedFile
from backend.storage.drafts import Draft
from backend.storage.sessions import SessionKey, client_id
from backend.storage.shared import SharedWorkspaces
from backend.storage.workspaces import FileTooLarge, NotARegularFile, UnsafePath, Workspaces

router = APIRouter(prefix="/api", tags=["files"], responses=CLIENT_ERRORS)
STREAMED_UPLOAD = re.compile(r"/api/sessions/[^/]+/uploads/[^/]+")  # past the body size cap
# Multipart uploads: a body up to PYTHON_CODE_MAX_FILE_SIZE (here and in OpenAI's Files and
# Containers APIs, backend/api/routes/openai_files.py and containers.py).
FORM_UPLOADS = re.compile(r"/api/upload|/api/evals/sets|/v1/files|/v1/containers/[^/]+/files")


@router.post("/upload", status_code=status.HTTP_201_CREATED)
async def upload_file(
    session_id: Annotated[SessionId, Form()],
    file: Annotated[UploadFile, File()],
    user: CurrentUser,
    limits: LimitsDep,
    settings: SettingsDep,
    store: StoreDep,
    workspaces: WorkspacesDep,
    shared: SharedDep,
    catalog: CatalogDep,
) -> UploadedFile:
    """Store a file in the session's workspace, under uploads/ (a multipart form)."""
    name = file.filename or ""
    extension = checked_name(name)
    quota = UploadQuota(limits, user)
    await quota.check(file.size or 0)
    key = opened_session(store, user, session_id)
    limit_mb = settings.PYTHON_CODE_MAX_FILE_SIZE
    try:
        size = await run_in_threadpool(
            workspaces.write_upload, key, name, file.file, int(limit_mb * MEGABYTE)
        )
    except FileTooLarge:
        raise ApiError(
            413,
            f"The file is larger than {limit_mb:g} MB (PYTHON_CODE_MAX_FILE_SIZE).",
            code="file_too_large",
        ) from None
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise no_room(await run_in_threadpool(workspaces.room, key)) from None
        raise unusable() from None
    except (UnsafePath, NotARegularFile):
        raise unusable() from None
    quota.add(size)
    return await described(shared, catalog, key, name, extension, size)


@router.put("/sessions/{session_id}/uploads/{name}", status_code=status.HTTP_201_CREATED)
async def put_upload(
    session_id: SessionId,
    name: str,
    request: Request,
    user: CurrentUser,
    limits: LimitsDep,
    settings: SettingsDep,
    store: StoreDep,
    workspaces: WorkspacesDep,
    shared: SharedDep,
    catalog: CatalogDep,
) -> UploadedFile:
    """Stream the raw request body into uploads/<name> (large files; up to MAX_UPLOAD_SIZE_MB)."""
    extension = checked_name(name)
    limit_mb = settings.MAX_UPLOAD_SIZE_MB
    limit = int(limit_mb * MEGABYTE)
    declared = request.headers.get("content-length", "")
    expected = int(declared) if declared.isdigit() else None
    if expected is not None and expected > limit:
        raise too_large(limit_mb)
    quota = UploadQuota(limits, user)
    await quota.check(expected or 0)
    key = opened_session(store, user, session_id)
    try:
        room = await run_in_threadpool(workspaces.room, key)
        if expected is not None and expected > room:
            raise no_room(room)
        draft = await run_in_threadpool(workspaces.upload_draft, key, name)
    except (UnsafePath, NotARegularFile, NotADirectoryError, OSError):
        raise unusable() from None
    try:
        size = await _stream_into(draft, request, workspaces, key, limit, limit_mb, quota)
    except ClientDisconnect:
        raise ApiError(
            400, "The upload was cut off before its end: send it again.", code="upload_incomplete"
        ) from None
    return await described(shared, catalog, key, name, extension, size)


async def _stream_into(
    draft: Draft,
    request: Request,
    workspaces: Workspaces,
    key: SessionKey,
    limit: int,
    mb: float,
    quota: UploadQuota,
) -> int:
    """The body into `draft`, committed once complete and on disk; aborted on any failure."""
    try:
        await write_body(
            request,
            quota.counted(draft.write),
            quota.room(lambda: run_in_threadpool(workspaces.room, key)),
            limit,
            too_large(mb),
        )
        return await run_in_threadpool(lambda: draft.commit(durable=True))
    except BaseException:
        draft.abort()  # unlinks at once, even when the request is being cancelled
        quota.recount()
        raise


async def described(
    shared: SharedWorkspaces,
    catalog: WorkspaceCatalog,
    key: SessionKey,
    name: str,
    extension: str,
    size: int,
) -> UploadedFile:
    """The stored upload, shared with the other servers (S3), and its metadata."""
    await shared.push(key)
    path = f"uploads/{name}"
    try:
        info = (await catalog.info(key, path)).to_dict()
    except (FileNotInWorkspace, NotARegularFile, UnsafePath, UnsupportedFileType) as exc:
        # Replaced or removed by the session's code meanwhile: stored, but not described.
        info = {"kind": "unknown", "summary": "", "details": {}, "error": str(exc)}
    return UploadedFile(
        **{**info, "name": name, "path": path, "size": size, "extension": extension},
        session_id=client_id(key),
    )
