"""OpenAI's Containers API (`/v1/containers`): a container is one of the user's sessions.

Its files are the workspace's uploads and what the code wrote (backend/core/containers.py).
Another user's container, a deleted one and a made-up id are 404; an expired one
answers a 400 that says so (retrieving it shows `status: "expired"`).
"""

from __future__ import annotations

import mimetypes
import time
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from backend.api.bodies import UploadQuota
from backend.api.container_files import container_file
from backend.api.deps import ContainersDep, CurrentUser, FilesDep, LimitsDep, WorkspacesDep
from backend.api.downloads import download_headers
from backend.api.errors import OPENAI_CLIENT_ERRORS, ApiError
from backend.api.openai_params import check_parameters
from backend.api.streamed import ClosingStreamingResponse
from backend.api.upload_checks import check_room, checked_name, stored_file_errors
from backend.models.openai_files import (
    ContainerCreate,
    ContainerDeleted,
    ContainerFileCreate,
    ContainerFileDeleted,
    ContainerFileObject,
    ContainerObject,
    Order,
    Page,
)

router = APIRouter(prefix="/v1", tags=["openai"], responses=OPENAI_CLIENT_ERRORS)

_FILE_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": ContainerFileCreate.model_json_schema()},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {"file": {"type": "string", "format": "binary"}},
                    "required": ["file"],
                }
            },
        },
    }
}


@router.post("/containers")
async def create_container(
    body: ContainerCreate,
    user: CurrentUser,
    containers: ContainersDep,
    files: FilesDep,
    limits: LimitsDep,
) -> ContainerObject:
    """A new container (a session of its own), with copies of `file_ids` in its uploads."""
    check_parameters(_unsupported(body), "auto")
    if body.network_policy is not None and body.network_policy.type == "allowlist":
        raise ApiError(
            400,
            "network_policy 'allowlist' is not supported: the sandbox has no network at all.",
            code="unsupported_parameter",
            param="network_policy",
        )
    await check_room(UploadQuota(limits, user), files, user.id, body.file_ids)
    with stored_file_errors():
        container = await containers.create(user.id, body.name, body.file_ids, body.minutes)
    return ContainerObject.of(container, time.time())


@router.get("/containers")
async def list_containers(
    user: CurrentUser,
    containers: ContainersDep,
    after: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Order = "desc",
    name: Annotated[str | None, Query(max_length=256)] = None,
) -> Page[ContainerObject]:
    now = time.time()
    listed = [
        ContainerObject.of(c, now)
        for c in containers.of_user(user.id)
        if name is None or c.name == name
    ]
    return Page[ContainerObject].of(listed, after=after, limit=limit, order=order)


@router.get("/containers/{container_id}")
async def retrieve_container(
    container_id: str, user: CurrentUser, containers: ContainersDep
) -> ContainerObject:
    return ContainerObject.of(containers.get(user.id, container_id), time.time())


@router.delete("/containers/{container_id}")
async def delete_container(
    container_id: str, user: CurrentUser, containers: ContainersDep
) -> ContainerDeleted:
    """The container, its files and its sandbox; its conversation's messages are kept."""
    await containers.delete(user.id, container_id)
    return ContainerDeleted(id=container_id)


@router.get("/containers/{container_id}/files")
async def list_container_files(
    container_id: str,
    user: CurrentUser,
    containers: ContainersDep,
    after: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    order: Order = "desc",
) -> Page[ContainerFileObject]:
    """The uploads and the files its code wrote (oldest first with `order=asc`)."""
    container = await containers.usable(user.id, container_id)
    files = sorted(await containers.list_files(container), key=lambda f: (f.created_at, f.path))
    listed = [ContainerFileObject.of(f) for f in files]
    return Page[ContainerFileObject].of(listed, after=after, limit=limit, order=order)


@router.post("/containers/{container_id}/files", openapi_extra=_FILE_BODY)
async def create_container_file(
    container_id: str,
    request: Request,
    user: CurrentUser,
    containers: ContainersDep,
    files: FilesDep,
    limits: LimitsDep,
) -> ContainerFileObject:
    """Add a file: JSON `{"file_id": ...}` copies one of the user's files; a multipart
    `file` is uploaded (the limits of `POST /api/upload`)."""
    container = await containers.usable(user.id, container_id)
    if request.headers.get("content-type", "").startswith("multipart/form-data"):
        async with request.form(max_files=1, max_fields=4) as form:
            upload = form.get("file")
            if not isinstance(upload, UploadFile):
                raise ApiError(400, "Missing the multipart field 'file'.", param="file")
            name = upload.filename or ""
            checked_name(name)
            quota = UploadQuota(limits, user)
            await quota.check(upload.size or 0)
            with stored_file_errors():
                added = await containers.upload(container, name, upload.file)
            quota.recount()
    else:
        try:
            body = ContainerFileCreate.model_validate_json(await request.body())
        except ValidationError:
            raise ApiError(
                400,
                'Send JSON {"file_id": "file-..."} or a multipart form with a \'file\'.',
                param="file_id",
            ) from None
        await check_room(UploadQuota(limits, user), files, user.id, [body.file_id])
        with stored_file_errors():
            added = await containers.add_user_file(user.id, container, body.file_id)
        UploadQuota(limits, user).recount()
    return ContainerFileObject.of(added)


@router.get("/containers/{container_id}/files/{file_id}")
async def retrieve_container_file(
    container_id: str, file_id: str, user: CurrentUser, containers: ContainersDep
) -> ContainerFileObject:
    container = await containers.usable(user.id, container_id)
    return ContainerFileObject.of(await containers.find_file(container, file_id))


@router.get(
    "/containers/{container_id}/files/{file_id}/content",
    response_class=StreamingResponse,
    responses={200: {"description": "The file's bytes.", "content": {"*/*": {}}}},
)
async def read_container_file_content(
    container_id: str,
    file_id: str,
    user: CurrentUser,
    containers: ContainersDep,
    workspaces: WorkspacesDep,
) -> StreamingResponse:
    container = await containers.usable(user.id, container_id)
    file = await containers.find_file(container, file_id)
    with container_file(file_id):
        chunks = await run_in_threadpool(workspaces.read_chunks, container.session_key, file.path)
    media_type = mimetypes.guess_type(file.path)[0] or "application/octet-stream"
    headers = download_headers(file.path.rsplit("/", 1)[-1])
    return ClosingStreamingResponse(chunks, media_type=media_type, headers=headers)


@router.delete("/containers/{container_id}/files/{file_id}")
async def delete_container_file(
    container_id: str, file_id: str, user: CurrentUser, containers: ContainersDep
) -> ContainerFileDeleted:
    container = await containers.usable(user.id, container_id)
    with container_file(file_id):
        await containers.delete_file(container, file_id)
    return ContainerFileDeleted(id=file_id)


def _unsupported(body: ContainerCreate) -> str | None:
    return next(
        (name for name, value in (body.model_extra or {}).items() if value is not None), None
    )
