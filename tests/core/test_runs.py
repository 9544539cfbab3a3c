"""A run's event buffer: numbered events, replay from any point, bounded by tokens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

from backend.core.chat_service import AgentEvent, Turn
from backend.core.runs import Run


class ScriptedTurn:
    """Just what a Run reads of a Turn: its events and how they look in public."""

    def __init__(self, events: list[AgentEvent], release: asyncio.Event | None = None) -> None:
        self.conversation = SimpleNamespace(session_key="u1-s1", id="c1")
        self.events = self._events(events, release)

    async def _events(
        self, events: list[AgentEvent], release: asyncio.Event | None
    ) -> AsyncIterator[AgentEvent]:
        for event in events:
            if release is not None and event.type == "final":
                await release.wait()
            yield event

    def public_event(self, event: AgentEvent) -> dict[str, Any] | None:
        return None if event.type == "usage" else {"type": event.type, **event.data}


def turn_events(tokens: int) -> list[AgentEvent]:
    return [
        AgentEvent("router", {"agent_type": "react"}),
        AgentEvent("code", {"code": "print(1)"}),
        AgentEvent("usage", {"tokens": 3}),
        *(AgentEvent("token", {"text": f"w{i} "}) for i in range(tokens)),
        AgentEvent("final", {"text": "all of it"}),
    ]


async def collect(run: Run, after: int = 0) -> list[dict[str, Any]]:
    return [event async for event in run.follow(after)]


async def test_events_are_numbered_and_replay_from_any_point() -> None:
    run = Run(cast(Turn, ScriptedTurn(turn_events(3))), user_id=1)
    run.start()
    everything = await collect(run)
    assert [e["type"] for e in everything] == [
        "router", "code", "token", "token", "token", "final", "done",
    ]  # fmt: skip
    assert [e["seq"] for e in everything] == list(range(1, 8))
    assert everything[-1] == {"type": "done", "status": "completed", "seq": 7}
    assert await collect(run, after=5) == everything[5:]
    assert await collect(run, after=7) == []


async def test_a_follower_sees_live_events_after_the_replay() -> None:
    release = asyncio.Event()
    run = Run(cast(Turn, ScriptedTurn(turn_events(2), release)), user_id=1)
    run.start()
    follower = run.follow()
    first = [await anext(follower) for _ in range(4)]  # router, code, two tokens: all so far
    assert [e["seq"] for e in first] == [1, 2, 3, 4] and not run.finished
    release.set()
    rest = [event async for event in follower]
    assert [e["type"] for e in rest] == ["final", "done"]


async def test_a_long_answer_overflows_the_buffer_with_tokens_but_keeps_its_steps() -> None:
    run = Run(cast(Turn, ScriptedTurn(turn_events(50))), user_id=1, max_events=10)
    run.start()
    replay = await collect(run)
    types = [e["type"] for e in replay]
    assert types[:2] == ["router", "code"]  # pushed out by tokens, still replayed
    assert types[2:] == ["token"] * 8 + ["final", "done"]
    assert replay[2]["text"] == "w42 "  # the oldest tokens went
    seqs = [e["seq"] for e in replay]
    assert seqs == sorted(seqs) and seqs[-1] == run.last_seq == 54
