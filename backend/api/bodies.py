"""Request bodies written to disk as they arrive: in pieces, off the event loop, capped.

Never holds more than one piece in memory. The disk's free space, and the user's
disk quota (`UploadQuota`), are checked again every so often, since other uploads
and runs share them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request

from backend.api.errors import ApiError
from backend.core.limits import Limits
from backend.observability.metrics import UPLOAD_BYTES
from backend.storage import User
from backend.storage.workspaces import DISK_FLOOR

MEGABYTE = 1024 * 1024
PIECE_BYTES = 4 * MEGABYTE  # written to disk in pieces of about this size
_ROOM_CHECK_BYTES = 256 * MEGABYTE


async def write_body(
    request: Request,
    write: Callable[[bytes], object],
    room: Callable[[], Awaitable[int]],
    allowed: int,
    too_large: ApiError,
) -> int:
    """Stream `request`'s body through `write` (run in a thread); returns the bytes written.

    Raises `too_large` past `allowed` bytes, a 507 when the disk falls to its floor, and
    `ClientDisconnect` if the client goes away (what was written stays written).
    """
    pending = bytearray()
    written = 0
    next_room_check = _ROOM_CHECK_BYTES
    try:
        async for chunk in request.stream():
            if written + len(pending) + len(chunk) > allowed:
                raise too_large
            pending += chunk
            if len(pending) >= PIECE_BYTES:
                written += await _flush(write, pending)
                if written >= next_room_check:
                    next_room_check += _ROOM_CHECK_BYTES
                    if (left := await room()) < 0:
                        raise no_room(left)
    except ClientDisconnect:
        await _flush(write, pending)  # what arrived is kept: a resumable upload goes on from it
        raise
    return written + await _flush(write, pending)


async def _flush(write: Callable[[bytes], object], pending: bytearray) -> int:
    if not pending:
        return 0
    piece = bytes(pending)
    pending.clear()
    await run_in_threadpool(write, piece)
    return len(piece)


def no_room(room: int) -> ApiError:
    free = max(room, 0) / MEGABYTE
    return ApiError(
        507,
        f"Not enough disk space for this upload: {free:.0f} MB can be written before the "
        f"{DISK_FLOOR / MEGABYTE:.0f} MB the server keeps free. Free space on the server, "
        "then send it again.",
        code="insufficient_storage",
    )


def over_quota(used: int, quota_mb: int) -> ApiError:
    return ApiError(
        507,
        f"Not enough room in your disk quota for this upload: your sessions use "
        f"{max(used, 0) / MEGABYTE:.0f} MB of your {quota_mb} MB (USER_MAX_DISK_MB). Delete "
        "files or sessions you no longer need, or ask an admin to raise your quota, then "
        "send it again.",
        code="disk_quota_exceeded",
    )


class UploadQuota:
    """The user's disk quota (USER_MAX_DISK_MB, or an admin's), as an upload sees it."""

    def __init__(self, limits: Limits, user: User) -> None:
        self.limits = limits
        self.user = user

    async def check(self, adding: int = 0) -> None:
        """A 507 if the user's workspaces are over their quota, or `adding` would be."""
        left, quota_mb = await run_in_threadpool(self.limits.disk_left, self.user)
        if left < 0 or adding > left:
            raise over_quota(quota_mb * MEGABYTE - left, quota_mb)

    def counted(self, write: Callable[[bytes], object]) -> Callable[[bytes], None]:
        """`write`, adding each piece to the user's cached total as it lands."""

        def counting(piece: bytes) -> None:
            write(piece)
            self.limits.disk.add(self.user.id, len(piece))
            UPLOAD_BYTES.inc(len(piece))

        return counting

    def room(self, disk_room: Callable[[], Awaitable[int]]) -> Callable[[], Awaitable[int]]:
        """`write_body`'s periodic check: the quota (a 507 past it), then the disk's room."""

        async def room() -> int:
            await self.check()
            return await disk_room()

        return room

    def add(self, size: int) -> None:
        self.limits.disk.add(self.user.id, size)
        UPLOAD_BYTES.inc(size)

    def recount(self) -> None:
        """Something was written or removed in an amount not counted: walk again."""
        self.limits.disk.changed(self.user.id)
