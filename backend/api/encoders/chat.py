"""`/api/chat` and `/api/runs`: each event as `event: <type>` SSE whose JSON also
carries `type`; `final` sums the turn up. What only the server uses (`accepted`,
`usage`, `finish`) is not sent."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator

from backend.api.encoders.links import linked
from backend.api.sse import Last, sse_data
from backend.core.events import SERVER_ONLY_TYPES, Failed, Final, TurnEvent
from backend.core.runs import Numbered
from backend.llm import LLMError
from backend.models.chat import ChartShown, ChatResponse, TableShown


async def typed_sse(events: AsyncGenerator[TurnEvent, None], session_id: str) -> AsyncIterator[str]:
    """The turn (in session `session_id`) as typed SSE; its last frames (`final` or
    `error`, then `done`) go out with the end of the response."""
    done = sse_data({"type": "done"}, event="done")
    try:
        async with contextlib.aclosing(events):
            async for event in events:
                if event.type == "final":
                    yield Last(sse_data(event.payload(), event="final") + done)
                elif event.type not in SERVER_ONLY_TYPES:
                    yield sse_data(linked(event.payload(), session_id), event=event.type)
    except LLMError as exc:
        error = Failed(message=exc.message, code=exc.code).payload()
        yield Last(sse_data(error, event="error") + done)


async def run_sse(numbered: AsyncIterator[Numbered], session_id: str) -> AsyncIterator[str]:
    """A run's events (in session `session_id`), each with its number as the SSE `id` and
    in its JSON (`seq`)."""
    async for item in numbered:
        payload = {**linked(item.event.payload(), session_id), "seq": item.seq}
        yield f"id: {item.seq}\n" + sse_data(payload, event=item.event.type)


def chat_response(final: Final) -> ChatResponse:
    session_id = final.summary.session_id
    return ChatResponse(
        answer=final.text,
        model=final.model,
        session_id=final.summary.session_id,
        conversation_id=final.summary.conversation_id,
        agent_type=final.summary.agent_type,
        metadata=final.summary,
        citations=final.citations,
        tables=[TableShown(**linked(t.payload(), session_id)) for t in final.tables],
        charts=[ChartShown(**linked(c.payload(), session_id)) for c in final.charts],
    )
