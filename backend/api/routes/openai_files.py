"""OpenAI's Files API (`/v1/files`): files a user keeps to give containers.

Limits and errors are those of `POST /api/upload`: the supported file types, the form
upload's size (PYTHON_CODE_MAX_FILE_SIZE), the user's disk quota. A file is its user's:
another user's id, a deleted one and a made-up one are all 404.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Query, UploadFile
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from backend.api.bodies import MEGABYTE, UploadQuota
from backend.api.deps import CurrentUser, FilesDep, LimitsDep, SettingsDep
from backend.api.downloads import download_headers
from backend.api.errors import OPENAI_CLIENT_ERRORS
from backend.api.streamed import ClosingStreamingResponse
from backend.api.upload_checks import checked_name, stored_file_errors
from backend.models.openai_files import FileDeleted, FileObject, FilePurpose, Order, Page

router = APIRouter(prefix="/v1", tags=["openai"], responses=OPENAI_CLIENT_ERRORS)


@router.post("/files")
async def create_file(
    file: Annotated[UploadFile, File()],
    purpose: Annotated[FilePurpose, Form()],
    user: CurrentUser,
    files: FilesDep,
    limits: LimitsDep,
    settings: SettingsDep,
) -> FileObject:
    """Upload a file (multipart: `file`, `purpose`)."""
    name = file.filename or ""
    checked_name(name)
    quota = UploadQuota(limits, user)
    await quota.check(file.size or 0)
    limit_mb = settings.PYTHON_CODE_MAX_FILE_SIZE
    with stored_file_errors(limit_mb):
        stored = await files.add(user.id, name, purpose, file.file, int(limit_mb * MEGABYTE))
    return FileObject.of(stored)


@router.get("/files")
async def list_files(
    user: CurrentUser,
    files: FilesDep,
    after: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=10000)] = 10000,
    order: Order = "desc",
    purpose: Annotated[str | None, Query(max_length=64)] = None,
) -> Page[FileObject]:
    """The user's files, newest first unless `order=asc`."""
    listed = [
        FileObject.of(f) for f in files.of_user(user.id) if purpose is None or f.purpose == purpose
    ]
    return Page[FileObject].of(listed, after=after, limit=limit, order=order)


@router.get("/files/{file_id}")
async def retrieve_file(file_id: str, user: CurrentUser, files: FilesDep) -> FileObject:
    return FileObject.of(files.get(user.id, file_id))


@router.get(
    "/files/{file_id}/content",
    response_class=StreamingResponse,
    responses={200: {"description": "The file's bytes.", "content": {"*/*": {}}}},
)
async def read_file_content(file_id: str, user: CurrentUser, files: FilesDep) -> StreamingResponse:
    stored = files.get(user.id, file_id)
    chunks = await run_in_threadpool(files.chunks, user.id, stored.id)
    headers = download_headers(stored.filename)
    return ClosingStreamingResponse(chunks, media_type="application/octet-stream", headers=headers)


@router.delete("/files/{file_id}")
async def delete_file(file_id: str, user: CurrentUser, files: FilesDep) -> FileDeleted:
    await files.delete(user.id, file_id)
    return FileDeleted(id=file_id)
