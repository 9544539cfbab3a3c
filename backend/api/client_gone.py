"""Work for a request whose client has gone is stopped, not finished for nobody.

Starlette runs a plain (not streamed) route's handler to its end even after its client
closed the connection. For the governor's work (a table query sorting millions of rows,
an export hashing gigabytes) that keeps a place, the CPU and DuckDB's memory for an
answer nobody reads, and a user who gives up and asks again holds two. `until_gone` runs
the work as a task beside a watch on the request's ASGI channel: if the client goes
first, the work is cancelled (`Held.run` then interrupts it and waits for its thread to
end), and the handler ends with a 499 that nobody receives.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import TypeVar

from fastapi import Request

from backend.api.errors import ApiError

T = TypeVar("T")
logger = logging.getLogger(__name__)


async def until_gone(request: Request, work: Awaitable[T], what: str) -> T:
    """`work`'s result; cancelled, and a 499, if the client goes away first."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:  # the handler itself is cancelled (the server stops)
        task.cancel()
        raise
    finally:
        gone.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task  # its thread has ended: the place can go back
    logger.info("A %s was stopped: its client went away", what)
    raise ApiError(499, "The client closed the request.", code="client_closed_request")


async def _disconnected(request: Request) -> None:
    """Returns when the client has gone (a GET's body, if any, was read already)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
