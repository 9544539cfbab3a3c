"""Resumable uploads: the tus protocol 1.0.0, with the creation and termination extensions.

    POST   /api/tus/       Upload-Length and Upload-Metadata (`session_id`, `filename`,
                           base64 as tus says): 201 with the upload's Location
    HEAD   /api/tus/{id}   Upload-Offset: how much has arrived
    PATCH  /api/tus/{id}   application/offset+octet-stream from Upload-Offset on
    DELETE /api/tus/{id}   give the upload up

The bytes go to `DATA_DIR/tus/` as they arrive (`backend/storage/resumable.py`),
and the finished file lands in the session's `uploads/`, described like any
upload. A cut PATCH keeps what arrived; the client asks HEAD and goes on from
there. Only the user who created an upload sees it. Our own small implementation
rather than a package's: the one we tried (tuspyserver 4.4) waits for its upload
lock with `time.sleep` on the event loop, up to 30 s, exactly when a client
resumes after a cut.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re

from fastapi import APIRouter, Request, Response, status
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from backend.api.bodies import MEGABYTE, UploadQuota, no_room, write_body
from backend.api.deps import (
    CurrentUser,
    LimitsDep,
    SettingsDep,
    SharedDep,
    StoreDep,
    UploadsDep,
    WorkspacesDep,
    opened_session,
)
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.api.upload_checks import checked_name, too_large, unusable
from backend.storage import User
from backend.storage.drafts import write_all
from backend.storage.resumable import ResumableUploads, Upload
from backend.storage.sessions import valid_session_id
from backend.storage.shared import SharedWorkspaces
from backend.storage.workspaces import NotARegularFile, UnsafePath, Workspaces

router = APIRouter(prefix="/api/tus", tags=["files"], responses=CLIENT_ERRORS)
STREAMED_PATCH = re.compile(r"/api/tus/[0-9a-f]{32}")  # past the body size cap

VERSION = "1.0.0"


def _headers(**more: str) -> dict[str, str]:
    return {"Tus-Resumable": VERSION, "Cache-Control": "no-store", **more}


@router.options("/", status_code=status.HTTP_204_NO_CONTENT)
async def tus_options(settings: SettingsDep) -> Response:
    """The tus version, extensions and largest upload this server takes."""
    max_size = str(int(settings.MAX_UPLOAD_SIZE_MB * MEGABYTE))
    extensions = {"Tus-Version": VERSION, "Tus-Extension": "creation,termination"}
    headers = _headers(**extensions, **{"Tus-Max-Size": max_size})
    return Response(status_code=status.HTTP_204_NO_CONTENT, headers=headers)


@router.options("/{upload_id}", status_code=status.HTTP_204_NO_CONTENT)
async def tus_upload_options(upload_id: str, settings: SettingsDep) -> Response:
    """The same, at an upload's URL (a handler of its own, so OpenAPI declares `upload_id`)."""
    return await tus_options(settings)


@router.post("/", status_code=status.HTTP_201_CREATED, response_class=Response)
async def create_upload(
    request: Request,
    user: CurrentUser,
    limits: LimitsDep,
    settings: SettingsDep,
    store: StoreDep,
    workspaces: WorkspacesDep,
    uploads: UploadsDep,
    shared: SharedDep,
) -> Response:
    """Start an upload of Upload-Length bytes for the session and file name in its metadata."""
    _check_version(request)
    declared = request.headers.get("upload-length", "")
    if not declared.isdigit():
        raise ApiError(400, "Upload-Length is required (deferred lengths are not supported).")
    length = int(declared)
    metadata = _metadata(request.headers.get("upload-metadata", ""))
    session_id, filename = metadata.get("session_id", ""), metadata.get("filename", "")
    if not session_id or not filename:
        raise ApiError(400, "Upload-Metadata must carry session_id and filename.")
    checked_name(filename)
    if not valid_session_id(session_id):
        raise ApiError(400, "Upload-Metadata's session_id is not a valid session id.")
    await UploadQuota(limits, user).check(length)
    key = opened_session(store, user, session_id)
    limit_mb = settings.MAX_UPLOAD_SIZE_MB
    if length > limit_mb * MEGABYTE:
        raise too_large(limit_mb)
    try:
        room = await run_in_threadpool(workspaces.room, key)
    except (UnsafePath, NotARegularFile, NotADirectoryError, OSError):
        raise unusable() from None
    if length > room:
        raise no_room(room)
    upload = await run_in_threadpool(uploads.create, user.id, key, filename, length)
    if length == 0:  # complete as created: clients send no PATCH for an empty file
        await _finish(upload, uploads, workspaces, shared)
    location = f"/api/tus/{upload.id}"
    return Response(status_code=201, headers=_headers(Location=location, **{"Upload-Offset": "0"}))


@router.head("/{upload_id}", response_class=Response)
async def upload_offset(upload_id: str, user: CurrentUser, uploads: UploadsDep) -> Response:
    """How much of the upload has arrived."""
    upload = _own(uploads, user, upload_id)
    offset = await run_in_threadpool(uploads.offset, upload)
    headers = {"Upload-Offset": str(offset), "Upload-Length": str(upload.length)}
    return Response(status_code=200, headers=_headers(**headers))


@router.patch("/{upload_id}", status_code=status.HTTP_204_NO_CONTENT)
async def append_to_upload(
    upload_id: str,
    request: Request,
    user: CurrentUser,
    limits: LimitsDep,
    workspaces: WorkspacesDep,
    uploads: UploadsDep,
    shared: SharedDep,
) -> Response:
    """Append the body at Upload-Offset; the last piece moves the file into uploads/."""
    _check_version(request)
    upload = _own(uploads, user, upload_id)
    if request.headers.get("content-type") != "application/offset+octet-stream":
        raise ApiError(415, "A PATCH body must be application/offset+octet-stream.")
    busy = uploads.busy
    if upload.id in busy:
        raise ApiError(423, "Another PATCH to this upload is in progress: retry shortly.")
    busy.add(upload.id)
    try:
        quota = UploadQuota(limits, user)
        return await _append(upload, request, quota, uploads, workspaces, shared)
    finally:
        busy.discard(upload.id)


async def _append(
    upload: Upload,
    request: Request,
    quota: UploadQuota,
    uploads: ResumableUploads,
    workspaces: Workspaces,
    shared: SharedWorkspaces,
) -> Response:
    offset = await run_in_threadpool(uploads.offset, upload)
    if request.headers.get("upload-offset") != str(offset):
        raise ApiError(409, f"Upload-Offset must be {offset}, the bytes that have arrived.")
    fd = await run_in_threadpool(uploads.appender, upload)
    try:
        written = await write_body(
            request,
            quota.counted(lambda piece: write_all(fd, piece)),
            quota.room(lambda: run_in_threadpool(workspaces.room, upload.session_id)),
            upload.length - offset,
            ApiError(413, f"The upload is longer than its Upload-Length ({upload.length})."),
        )
    except ClientDisconnect:
        return Response(status_code=204)  # nobody listens; HEAD tells what was kept
    finally:
        os.close(fd)
    offset += written
    if offset == upload.length:
        await _finish(upload, uploads, workspaces, shared)
    return Response(status_code=204, headers=_headers(**{"Upload-Offset": str(offset)}))


async def _finish(
    upload: Upload, uploads: ResumableUploads, workspaces: Workspaces, shared: SharedWorkspaces
) -> None:
    """Move the complete upload into the session's uploads/, and share it (S3)."""
    try:
        await run_in_threadpool(uploads.finish, upload, workspaces)
    except (UnsafePath, NotARegularFile, NotADirectoryError, OSError):
        raise unusable() from None
    await shared.push(upload.session_id)


@router.delete("/{upload_id}", status_code=status.HTTP_204_NO_CONTENT)
async def terminate_upload(
    upload_id: str, user: CurrentUser, limits: LimitsDep, uploads: UploadsDep
) -> Response:
    """Give the upload up: what arrived is deleted."""
    upload = _own(uploads, user, upload_id)
    if upload.id in uploads.busy:
        raise ApiError(423, "A PATCH to this upload is in progress: retry shortly.")
    await run_in_threadpool(uploads.delete, upload)
    UploadQuota(limits, user).recount()
    return Response(status_code=204, headers=_headers())


def _own(uploads: ResumableUploads, user: User, upload_id: str) -> Upload:
    upload = uploads.get(upload_id)
    if upload is None or upload.user_id != user.id:
        raise ApiError(404, "Upload not found.", code="upload_not_found")
    return upload


def _check_version(request: Request) -> None:
    if request.headers.get("tus-resumable") != VERSION:
        raise ApiError(
            412, f"Tus-Resumable: {VERSION} is required.", headers={"Tus-Version": VERSION}
        )


def _metadata(header: str) -> dict[str, str]:
    """Upload-Metadata: comma-separated `key base64value` pairs."""
    values: dict[str, str] = {}
    for pair in filter(None, (part.strip() for part in header.split(","))):
        key, _, encoded = pair.partition(" ")
        with contextlib.suppress(binascii.Error, UnicodeDecodeError):
            values[key] = base64.b64decode(encoded, validate=True).decode()
    return values
