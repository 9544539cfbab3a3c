"""OpenAI's containers: a container is one of the user's sessions, its workspace and sandbox.

A container made for itself is the session named by its id (`cntr_…`, a valid session
id); one made for a continued conversation (`/v1/responses` with `previous_response_id`
and an `auto` container) names that conversation's session. Its files are the
workspace's files that a user would call theirs or the code's: uploads (`source:
"user"`) and what runs wrote (`"assistant"`), never the server's own (hidden names, the
persisted variables, the run scripts, the notepad). A file's id is derived from the
container and its path, so a file the code wrote has an id as soon as it exists.

A container expires `expires_minutes` after its last activity (as OpenAI's: 20 by
default): its warm sandbox is ended, and then it answers only that it has expired. The
conversation and its workspace are kept as any session's are (until the user deletes
the conversation); deleting the container deletes its files and sandbox, not the
conversation's messages.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import BinaryIO, TypeVar

from starlette.concurrency import run_in_threadpool

from backend.core.user_files import UserFiles
from backend.storage import Store
from backend.storage.openai_objects import Container, new_container_id, valid_container_id
from backend.storage.sessions import SessionKey, check_key, session_key
from backend.storage.shared import SharedWorkspaces
from backend.storage.workspaces import Workspaces, is_user_file, safe_filename
from backend.tools.sandbox.pool import SessionExecutors

logger = logging.getLogger(__name__)

DEFAULT_EXPIRY_MINUTES = 20
MAX_EXPIRY_MINUTES = 7 * 24 * 60
SANDBOX_PATH = "/workspace"  # where the sandbox shows the workspace (tools/sandbox/command.py)
T = TypeVar("T")


class ContainerNotFound(LookupError):
    def __init__(self, container_id: str) -> None:
        super().__init__(container_id)
        self.container_id = container_id


class ContainerExpired(Exception):
    def __init__(self, container: Container) -> None:
        super().__init__(container.id)
        self.container = container


class ContainerFileNotFound(LookupError):
    def __init__(self, file_id: str) -> None:
        super().__init__(file_id)
        self.file_id = file_id


@dataclass(frozen=True)
class ContainerFile:
    id: str
    container_id: str
    path: str  # workspace-relative
    bytes: int
    created_at: float
    source: str  # "user" (an upload) or "assistant" (the code wrote it)

    @property
    def sandbox_path(self) -> str:
        return f"{SANDBOX_PATH}/{self.path}"


def container_file_id(container_id: str, path: str) -> str:
    digest = hashlib.sha256(f"{container_id}\0{path}".encode()).hexdigest()
    return f"cfile_{digest[:32]}"


class Containers:
    def __init__(
        self,
        store: Store,
        workspaces: Workspaces,
        shared: SharedWorkspaces,
        executors: SessionExecutors,
        files: UserFiles,
        max_file_bytes: int,
    ) -> None:
        self.store = store
        self.workspaces = workspaces
        self.shared = shared
        self.executors = executors
        self.files = files
        self.max_file_bytes = max_file_bytes
        self._busy: dict[str, int] = {}  # container id -> turns using it now

    async def create(
        self,
        user_id: int,
        name: str,
        file_ids: list[str],
        minutes: int = DEFAULT_EXPIRY_MINUTES,
        session: str | None = None,
        *,
        titled: bool = True,
    ) -> Container:
        """A new container with copies of the user's files `file_ids` in its uploads/ (every
        id is checked first: `UserFileNotFound`). `session`: the key of an existing session
        of the user's to be the container (else a session of the container's own). Its
        conversation is titled with its name if `titled`, else by its first message."""
        stored = [self.files.get(user_id, file_id) for file_id in file_ids]
        container_id = new_container_id()
        key = check_key(session) if session is not None else session_key(user_id, container_id)
        self.store.conversation_for_session(user_id, key, name if titled else "")
        container = self.store.add_container(user_id, container_id, key, name, minutes)
        for file in stored:
            await self._copy_in(user_id, container, file.id, file.filename)
        return container

    def get(self, user_id: int, container_id: str) -> Container:
        """The user's container, expired or not (`ContainerNotFound`)."""
        found = (
            self.store.get_container(user_id, container_id)
            if valid_container_id(container_id)
            else None
        )
        if found is None:
            raise ContainerNotFound(container_id)
        return found

    async def usable(self, user_id: int, container_id: str) -> Container:
        """The user's container if it has not expired (`ContainerExpired`); now active."""
        container = self.get(user_id, container_id)
        if await self._expire_if_due(container, time.time()):
            raise ContainerExpired(self.get(user_id, container_id))
        now = time.time()
        self.store.touch_container(container.id, now)
        return self.get(user_id, container_id)

    def of_session(self, key: SessionKey) -> Container | None:
        return self.store.container_of_session(key)

    def of_user(self, user_id: int) -> list[Container]:
        return self.store.list_containers(user_id)

    async def delete(self, user_id: int, container_id: str) -> None:
        """The container, its sandbox and its files; the conversation's messages stay."""
        container = self.get(user_id, container_id)
        self.store.delete_container(user_id, container.id)
        key = check_key(container.session_key)
        await self.executors.discard(key)
        await run_in_threadpool(self.workspaces.remove, key)
        await self.shared.remove(key)

    # Activity and expiry

    async def using(
        self, container: Container, events: AsyncGenerator[T, None]
    ) -> AsyncGenerator[T, None]:
        """`events`, with the container kept from expiring while they run and active after."""
        self._busy[container.id] = self._busy.get(container.id, 0) + 1
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    yield event
        finally:
            left = self._busy.pop(container.id) - 1
            if left:
                self._busy[container.id] = left
            self.store.touch_container(container.id, time.time())

    async def expire_due(self) -> int:
        """End the sandboxes of the containers idle past their time; how many."""
        now = time.time()
        ended = 0
        for container in self.store.live_containers():
            ended += await self._expire_if_due(container, now)
        return ended

    async def _expire_if_due(self, container: Container, now: float) -> bool:
        if container.expired_at is not None:
            return True
        if not container.expired(now) or container.id in self._busy:
            return False
        if self.store.expire_container(container.id, now):  # one caller ends the sandbox
            logger.info("Container %s expired: ending its sandbox", container.id)
            await self.executors.discard(check_key(container.session_key))
        return True

    # Files

    async def list_files(self, container: Container) -> list[ContainerFile]:
        key = check_key(container.session_key)
        await self.shared.pull(key)
        listed = await run_in_threadpool(self.workspaces.list_files, key)
        return [
            ContainerFile(
                id=container_file_id(container.id, f.path),
                container_id=container.id,
                path=f.path,
                bytes=f.size,
                created_at=f.modified,
                source="user" if f.path.startswith("uploads/") else "assistant",
            )
            for f in listed
            if is_user_file(f.path)
        ]

    async def find_file(self, container: Container, file_id: str) -> ContainerFile:
        for file in await self.list_files(container):
            if file.id == file_id:
                return file
        raise ContainerFileNotFound(file_id)

    async def add_user_file(
        self, user_id: int, container: Container, file_id: str
    ) -> ContainerFile:
        """A copy of the user's file `file_id` in the container's uploads/."""
        file = self.files.get(user_id, file_id)
        path = await self._copy_in(user_id, container, file.id, file.filename)
        return await self.find_file(container, container_file_id(container.id, path))

    async def upload(self, container: Container, filename: str, source: BinaryIO) -> ContainerFile:
        key = check_key(container.session_key)
        name = safe_filename(filename)
        await run_in_threadpool(self.workspaces.ensure, key)
        await run_in_threadpool(
            self.workspaces.write_upload, key, name, source, self.max_file_bytes
        )
        await self.shared.push(key)
        return await self.find_file(container, container_file_id(container.id, f"uploads/{name}"))

    async def delete_file(self, container: Container, file_id: str) -> None:
        file = await self.find_file(container, file_id)
        key = check_key(container.session_key)
        await run_in_threadpool(self.workspaces.delete_file, key, file.path)
        await self.shared.push(key)

    async def _copy_in(
        self, user_id: int, container: Container, file_id: str, filename: str
    ) -> str:
        key = check_key(container.session_key)
        name = safe_filename(filename)
        await run_in_threadpool(self.workspaces.ensure, key)
        with self.files.open(user_id, file_id) as source:
            await run_in_threadpool(
                self.workspaces.write_upload, key, name, source, self.max_file_bytes
            )
        await self.shared.push(key)
        return f"uploads/{name}"
