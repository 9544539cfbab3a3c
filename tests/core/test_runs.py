"""A run's event buffer: numbered events, replay from any point, bounded by tokens."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, cast

from backend.core.events import AnswerDelta, Code, Final, Routed, TurnEvent, TurnSummary, Usage
from backend.core.runs import Run
from backend.core.turn import Turn

SUMMARY = TurnSummary(
    agent_type="react", route_reason="", session_id="s1", conversation_id="c1",
    tool_calls=[], code=[], files=[], iterations=0, llm_calls=0,
)  # fmt: skip


class ScriptedTurn:
    """Just what a Run reads of a Turn: its events."""

    def __init__(self, events: list[TurnEvent], release: asyncio.Event | None = None) -> None:
        self.conversation = SimpleNamespace(session_key="u1-s1", id="c1")
        self.events = self._events(events, release)

    async def _events(
        self, events: list[TurnEvent], release: asyncio.Event | None
    ) -> AsyncIterator[TurnEvent]:
        for event in events:
            if release is not None and event.type == "final":
                await release.wait()
            yield event


def turn_events(tokens: int) -> list[TurnEvent]:
    final = Final(text="all of it", model="m", summary=SUMMARY, citations=[], finish_reason="stop")
    return [
        Routed(agent_type="react", reason="", model="m", opening=SUMMARY),
        Code(attempt=1, code="print(1)"),
        Usage(prompt_tokens=3, completion_tokens=0),
        *(AnswerDelta(text=f"w{i} ") for i in range(tokens)),
        final,
    ]


def public(numbered: Any) -> dict[str, Any]:
    return {**numbered.event.payload(), "seq": numbered.seq}


async def collect(run: Run, after: int = 0) -> list[dict[str, Any]]:
    return [public(event) async for event in run.follow(after)]


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
    first = [public(await anext(follower)) for _ in range(4)]  # router, code, two tokens
    assert [e["seq"] for e in first] == [1, 2, 3, 4] and not run.finished
    release.set()
    rest = [public(event) async for event in follower]
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
