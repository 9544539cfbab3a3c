"""Starting a streamed turn so that early failures are still plain HTTP errors."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from backend.core.events import TurnEvent


async def start_stream(
    events: AsyncGenerator[TurnEvent, None],
) -> AsyncGenerator[TurnEvent, None]:
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
    return _chain(head, events)


async def _chain(
    head: list[TurnEvent], rest: AsyncGenerator[TurnEvent, None]
) -> AsyncGenerator[TurnEvent, None]:
    try:
        for event in head:
            yield event
        async for event in rest:
            yield event
    finally:
        await rest.aclose()
