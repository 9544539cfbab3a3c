"""Starting a streamed turn so that early failures are still plain HTTP errors."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncGenerator
from types import TracebackType
from typing import Any

from backend.core.events import TurnEvent


async def start_stream(events: AsyncGenerator[TurnEvent, None]) -> TurnStream:
    """Wait for the agent's first event, then stream everything.

    Failing to reach the LLM raises here, before the response starts, so the
    client gets a 503 with a fix instead of a 200 stream that breaks at once.
    An upstream that accepted the request (`accepted`) lets the response start
    while the model works on its first token.
    """
    head: list[TurnEvent] = []
    async for event in events:
        head.append(event)
        if event.type != "router":
            break
    return TurnStream(head, events)


class TurnStream(AsyncGenerator[TurnEvent, None]):
    """The turn's events, the first ones already read. Closing it closes the turn's own
    generator even when nothing was read from here: a client gone before its response
    began must have its turn recorded and its places given back now, not once the
    garbage collector finds the turn, whose generators, all closed at once then, race
    each other ("aclose(): asynchronous generator is already running")."""

    def __init__(self, head: list[TurnEvent], rest: AsyncGenerator[TurnEvent, None]) -> None:
        self._head = deque(head)
        self._rest = rest

    async def asend(self, value: None) -> TurnEvent:
        if self._head:
            return self._head.popleft()
        return await self._rest.asend(value)

    async def athrow(
        self,
        kind: Any,
        value: Any = None,
        traceback: TracebackType | None = None,
    ) -> TurnEvent:
        self._head.clear()
        return await self._rest.athrow(kind, value, traceback)

    async def aclose(self) -> None:
        self._head.clear()
        await self._rest.aclose()
