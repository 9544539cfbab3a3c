"""Turns that outlive their HTTP request: run ids, numbered events, replay, cancel.

A browser reloads, loses its network for a moment, or leaves a conversation and
comes back; the run goes on regardless. Each run keeps a bounded buffer of its
public events, numbered from 1, so a client can replay what it missed
(`follow(after=N)`) and then follow live; when a long answer's tokens overflow
the buffer, its oldest tokens go and its steps stay. Only `cancel` stops a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from backend.core.events import SERVER_ONLY_TYPES, Done, Failed, TurnEvent
from backend.core.turn import Turn
from backend.llm import LLMError
from backend.storage.sessions import SessionKey, session_key

logger = logging.getLogger(__name__)

RunStatus = Literal["running", "completed", "cancelled", "error"]

MAX_EVENTS = 5_000  # a run's buffer; the `final` event carries the whole answer anyway
KEEP_FINISHED_SECONDS = 600.0  # a finished run can still be replayed this long
_CANCEL_WAIT = 15.0  # seconds `cancel` waits for the run to unwind


class RunInProgress(Exception):
    """The session already has a run going."""


@dataclass(frozen=True)
class Numbered:
    """A run's event and its number (from 1), which a client replays after."""

    seq: int
    event: TurnEvent


class Run:
    def __init__(self, turn: Turn, user_id: int, max_events: int = MAX_EVENTS) -> None:
        self.id = uuid.uuid4().hex
        self.turn = turn
        self.user_id = user_id
        self.session_key = turn.conversation.session_key
        self.conversation_id = turn.conversation.id
        self.status: RunStatus = "running"
        self.finished_at: float | None = None
        self.last_seq = 0
        self._events: deque[Numbered] = deque(maxlen=max_events)
        # Steps pushed out of the buffer by a long answer's tokens: a replay still draws them.
        self._kept_steps: list[Numbered] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def finished(self) -> bool:
        return self.status != "running"

    def start(self) -> None:
        self._task = asyncio.create_task(self._drive(), name=f"run-{self.id}")

    def _append(self, event: TurnEvent) -> None:
        self.last_seq += 1
        if len(self._events) == self._events.maxlen and self._events[0].event.type != "token":
            self._kept_steps.append(self._events[0])
        self._events.append(Numbered(self.last_seq, event))
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    async def _drive(self) -> None:
        status: RunStatus = "completed"
        try:
            async with contextlib.aclosing(self.turn.events) as events:
                async for event in events:
                    if event.type not in SERVER_ONLY_TYPES:
                        self._append(event)
        except asyncio.CancelledError:
            status = "cancelled"  # the turn recorded its partial answer as cancelled
        except LLMError as exc:
            status = "error"
            self._append(Failed(message=exc.message, code=exc.code))
        except Exception:
            logger.exception("run %s failed", self.id)
            status = "error"
            self._append(Failed(message="The run failed; see the server log."))
        self.status, self.finished_at = status, time.monotonic()
        self._append(Done(status=status))

    async def follow(self, after: int = 0) -> AsyncIterator[Numbered]:
        """Every buffered event numbered above `after`, then new ones until the run ends."""
        while True:
            wake = self._wake  # taken before reading, so no event slips between
            for numbered in [*self._kept_steps, *self._events]:
                if numbered.seq > after:
                    after = numbered.seq
                    yield numbered
            if self.finished and after >= self.last_seq:
                return
            await wake.wait()

    async def cancel(self) -> None:
        """Stop the run (its sandboxed code is killed) and wait until it has unwound."""
        task = self._task
        if task is None or task.done():
            return
        task.cancel()
        await asyncio.wait({task}, timeout=_CANCEL_WAIT)


class RunRegistry:
    """The server's runs, by id; finished ones are forgotten after a while."""

    def __init__(self, keep_finished_seconds: float = KEEP_FINISHED_SECONDS) -> None:
        self.keep_finished_seconds = keep_finished_seconds
        self._runs: dict[str, Run] = {}
        self._starting: set[SessionKey] = set()  # the session keys whose turn is opening

    async def start(
        self, user_id: int, session_id: str | None, open_turn: Callable[[], Awaitable[Turn]]
    ) -> Run:
        """Open a turn with `open_turn` and run it in the background.

        Refused while the user's session has a run going or starting: the check comes
        before `open_turn` stores the user's message, so a refused turn leaves no trace.
        (Another user's session is `open_turn`'s to refuse, as unknown.)
        """
        self._forget_old()
        key = session_key(user_id, session_id) if session_id is not None else None
        if key is not None:
            if key in self._starting or self.active_for(key) is not None:
                raise RunInProgress(key)
            self._starting.add(key)
        try:
            turn = await open_turn()
        finally:
            if key is not None:
                self._starting.discard(key)
        run = Run(turn, user_id)
        self._runs[run.id] = run
        run.start()
        return run

    def get(self, run_id: str, user_id: int) -> Run | None:
        """The run, only for its owner."""
        run = self._runs.get(run_id)
        return run if run is not None and run.user_id == user_id else None

    def active_for(self, key: SessionKey) -> Run | None:
        """The unfinished run of the session key `key`."""
        return next(
            (r for r in self._runs.values() if r.session_key == key and not r.finished),
            None,
        )

    def forget_session(self, key: SessionKey) -> None:
        """Drop the finished runs of the session key `key`, and their events (a deleted
        session)."""
        for run_id, run in list(self._runs.items()):
            if run.session_key == key and run.finished:
                del self._runs[run_id]

    def _forget_old(self) -> None:
        cutoff = time.monotonic() - self.keep_finished_seconds
        for run_id, run in list(self._runs.items()):
            if run.finished_at is not None and run.finished_at < cutoff:
                del self._runs[run_id]

    async def close(self) -> None:
        await asyncio.gather(*(run.cancel() for run in self._runs.values()))
