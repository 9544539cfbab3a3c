"""Request bodies written to disk as they arrive: in pieces, off the event loop, capped.

Never holds more than one piece in memory. The disk's free space is checked again
every so often, since other uploads and runs share it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request

from backend.api.errors import ApiError
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
