"""Stop a non-streaming turn when its client goes away, as streams already do."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import anyio
from starlette.requests import Request

T = TypeVar("T")


class ClientGone(Exception):
    """The client disconnected before the answer was ready."""


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Await `work`, cancelling it if the client disconnects first."""
    results: list[T] = []
    errors: list[Exception] = []
    async with anyio.create_task_group() as group:

        async def watch() -> None:
            while (await request.receive())["type"] != "http.disconnect":
                pass
            group.cancel_scope.cancel()

        group.start_soon(watch)
        try:
            results.append(await work)
        except Exception as exc:  # raised as itself, not wrapped in an ExceptionGroup
            errors.append(exc)
        group.cancel_scope.cancel()
    if errors:
        raise errors[0]
    if not results:
        raise ClientGone
    return results[0]
