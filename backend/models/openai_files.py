"""OpenAI's Files and Containers APIs (`/v1/files`, `/v1/containers`): the shapes on the wire.

Field for field as OpenAI's API reference has them, so the official SDKs parse them with
their own types. Timestamps are whole Unix seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from backend.core.containers import (
    DEFAULT_EXPIRY_MINUTES,
    MAX_EXPIRY_MINUTES,
    ContainerFile,
)
from backend.models.common import Text
from backend.storage.openai_objects import Container, StoredFile

# What `POST /v1/files` takes (OpenAI's list, less what needs a service we do not run).
FilePurpose = Literal["assistants", "batch", "fine-tune", "vision", "user_data"]
Order = Literal["asc", "desc"]
Item = TypeVar("Item", bound=BaseModel)


class FileObject(BaseModel):
    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int
    filename: str
    purpose: str
    status: Literal["uploaded", "processed", "error"] = "processed"
    expires_at: int | None = None
    status_details: str | None = None

    @classmethod
    def of(cls, file: StoredFile) -> FileObject:
        return cls(
            id=file.id,
            bytes=file.bytes,
            created_at=int(file.created_at),
            filename=file.filename,
            purpose=file.purpose,
        )


class FileDeleted(BaseModel):
    id: str
    object: Literal["file"] = "file"
    deleted: bool = True


class ExpiresAfter(BaseModel):
    model_config = ConfigDict(extra="forbid")

    anchor: Literal["last_active_at"]
    minutes: int = Field(ge=1, le=MAX_EXPIRY_MINUTES)


class NetworkPolicy(BaseModel):
    type: Literal["disabled", "allowlist"]
    allowed_domains: list[Text] | None = Field(default=None, max_length=100)


class ContainerCreate(BaseModel):
    model_config = ConfigDict(extra="allow")  # named in a 400 by `unsupported_parameter`

    name: Text = Field(min_length=1, max_length=256)
    file_ids: list[Text] = Field(default_factory=list, max_length=100)
    expires_after: ExpiresAfter | None = None
    # Accepted: the sandbox's memory is the operator's limit (SANDBOX_MEMORY_MB), whatever
    # the size asked for.
    memory_limit: Literal["1g", "4g", "16g", "64g"] | None = None
    network_policy: NetworkPolicy | None = None

    @property
    def minutes(self) -> int:
        return self.expires_after.minutes if self.expires_after else DEFAULT_EXPIRY_MINUTES


class ContainerObject(BaseModel):
    id: str
    object: Literal["container"] = "container"
    created_at: int
    name: str
    status: Literal["running", "expired"]
    expires_after: ExpiresAfter
    last_active_at: int

    @classmethod
    def of(cls, container: Container, now: float) -> ContainerObject:
        return cls(
            id=container.id,
            created_at=int(container.created_at),
            name=container.name,
            status="expired" if container.expired(now) else "running",
            expires_after=ExpiresAfter(anchor="last_active_at", minutes=container.expires_minutes),
            last_active_at=int(container.last_active_at),
        )


class ContainerDeleted(BaseModel):
    id: str
    object: Literal["container.deleted"] = "container.deleted"
    deleted: bool = True


class ContainerFileCreate(BaseModel):
    """`POST /v1/containers/{id}/files` as JSON: a copy of one of the user's files."""

    file_id: Text = Field(max_length=64)


class ContainerFileObject(BaseModel):
    id: str
    object: Literal["container.file"] = "container.file"
    bytes: int
    container_id: str
    created_at: int
    path: str
    source: str

    @classmethod
    def of(cls, file: ContainerFile) -> ContainerFileObject:
        return cls(
            id=file.id,
            bytes=file.bytes,
            container_id=file.container_id,
            created_at=int(file.created_at),
            path=file.sandbox_path,
            source=file.source,
        )


class ContainerFileDeleted(BaseModel):
    id: str
    object: Literal["container.file.deleted"] = "container.file.deleted"
    deleted: bool = True


class Page(BaseModel, Generic[Item]):
    """OpenAI's cursor page: `after` is the last id of the page before."""

    object: Literal["list"] = "list"
    data: list[Item]
    first_id: str | None
    last_id: str | None
    has_more: bool

    @classmethod
    def of(
        cls,
        items: Sequence[Item],
        *,
        after: str | None,
        limit: int,
        order: Order,
        key: Callable[[Item], str] = lambda item: str(getattr(item, "id", "")),
    ) -> Page[Item]:
        """`items` oldest first; an `after` that names none of them gives an empty page."""
        ordered = list(items) if order == "asc" else list(reversed(items))
        if after is not None:
            ids = [key(item) for item in ordered]
            ordered = ordered[ids.index(after) + 1 :] if after in ids else []
        data = ordered[:limit]
        return cls(
            data=data,
            first_id=key(data[0]) if data else None,
            last_id=key(data[-1]) if data else None,
            has_more=len(ordered) > limit,
        )
