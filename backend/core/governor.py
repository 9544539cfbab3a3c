"""One bound for the expensive work the server does on a user's behalf.

Each kind of work (WORK_LIMITS: table queries, table downloads, exports, plain chat
streams) has a share: places on this server (`total`), places per user (`per_user`),
seconds one piece may run, and two paces per user (backend/core/pace.py): the bytes a
user's downloads send (`Held.sent`), and the share of a CPU's time a user's work may
keep busy (`busy_share`, exports). `Governor.hold(kind, user_id)` takes a place:

- a user who holds `per_user` places of that kind waits for one of them to end (a page
  the UI asked for before the one it wants now, say), up to WORK_WAIT_SECONDS, then gets
  a 429; past WAITING_PER_USER waiting, one more gets the 429 at once. Waiting costs
  the server nothing but a sleeping task, where a refusal at once invited a client to
  ask again at once: 50 of one user's export requests were answered 60 times a second;
- a user whose work of the kind has spent its `busy_share` waits too, until it has
  time again, or gets a 429 at once with that time as its Retry-After;
- with every place on the server taken, the request waits its turn on the event loop
  (never in a thread-pool thread) within the same WORK_WAIT_SECONDS, then gets a 503;
- the place is given back however the work ends: done, failed, cancelled, disconnected.

`Held.run` runs blocking work in a thread once the place is held, within the kind's
seconds: past them (or when the request is cancelled) it calls the work's `interrupt`
and keeps the place until the thread has ended, so a place always means a thread at work.
Both refusals are `LimitReached` with a Retry-After, which every API answers in its shape.

The threads are the governor's own (`in_work_thread`), never the default pool that
ordinary requests use. Work that runs outside the GIL (`native`: DuckDB, Arrow) runs at a
lower CPU priority (nice WORK_NICE), and so do the threads it starts (DuckDB's inherit
it): places bound how much heavy work runs, and the priority leaves the CPU to everyone's
ordinary requests. Work that holds the GIL (openpyxl, Python loops) must not: descheduled
while holding it, a low-priority thread stalls the event loop (noisy_neighbour saw 2.5 s).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import math
import os
import threading
import time
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import anyio

from backend.config import Settings
from backend.config.settings import BUSY_BURST_SECONDS, WorkShare
from backend.core.limits import LimitReached
from backend.core.pace import Pace
from backend.core.shared_places import SharedPlaces

logger = logging.getLogger(__name__)

T = TypeVar("T")
WORK_NICE = 10  # CFS weight 110 against 1024 at nice 0: about a tenth of a busy CPU's time
INTERRUPT_AGAIN = 0.05  # seconds between interrupts of work that has not ended yet
WORK_THREADS = 32  # more than the places of every kind run in threads (4 + 8 + 2), and snapshots
WAITING_PER_USER = 64  # of one user's requests for a kind, waiting for its places


def _lower_priority() -> None:
    """In a new native work thread: its own nice value (Linux sets it per thread)."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORK_NICE)


_work_threads = concurrent.futures.ThreadPoolExecutor(
    max_workers=WORK_THREADS, thread_name_prefix="server-work"
)
_native_threads = concurrent.futures.ThreadPoolExecutor(
    max_workers=WORK_THREADS, thread_name_prefix="server-work-native", initializer=_lower_priority
)


async def in_work_thread(work: Callable[..., T], *args: object, native: bool = False) -> T:
    """`work(*args)` in one of the governor's threads; `native` (it runs outside the GIL):
    one at a lower CPU priority."""
    loop = asyncio.get_running_loop()
    threads = _native_threads if native else _work_threads
    return await loop.run_in_executor(threads, functools.partial(work, *args))


_WHAT = {
    "table_query": "table queries",
    "table_download": "table downloads",
    "export": "exports",
    "chat_stream": "chat replies",
    "rag_index": "document indexings",
    "snapshot": "data snapshots and restores",
}


class WorkTimedOut(LimitReached):
    """The work ran past its kind's seconds and was stopped (a 503)."""


@dataclass
class _Pool:
    share: WorkShare
    places: asyncio.Semaphore  # the server's
    users: Counter[int] = field(default_factory=Counter)  # holding or waiting, per user
    pace: Pace | None = None  # the bytes a user's work sends, per second (downloads)
    busy: Pace | None = None  # the seconds a user's work keeps a thread busy, per second
    own: dict[int, asyncio.Semaphore] = field(default_factory=dict)  # each user's places


@dataclass(frozen=True)
class Held:
    """A place taken for one piece of work of `kind`, which must end by `deadline`."""

    kind: str
    seconds: float
    deadline: float  # the event loop's clock
    user_id: int = 0
    pace: Pace | None = None  # the kind's bytes per second, per user
    busy: Pace | None = None  # the kind's seconds of work per second, per user

    async def sent(self, size: int) -> None:
        """`size` bytes of the work's answer went out: wait (on the event loop) for the
        user's pace to allow more."""
        if self.pace is not None:
            await self.pace.sent(self.user_id, size)

    def check(self) -> None:
        """Between steps of work that cannot be interrupted: past the deadline, a 503."""
        if asyncio.get_running_loop().time() > self.deadline:
            raise timed_out(self.kind, self.seconds)

    async def run(
        self,
        work: Callable[..., T],
        *args: object,
        interrupt: Callable[[], None] | None = None,
        native: bool = False,
    ) -> T:
        """`work(*args)` in a thread, stopped through `interrupt` at the deadline (a 503)
        or when the request is cancelled; the place is kept until the thread has ended.

        Stopped before its thread has begun, the work never begins. Stopped as it begins,
        an interrupt could come before there is anything to interrupt (DuckDB's query not
        started yet) and be lost, so it is repeated until the thread has ended."""
        stopped = threading.Event()
        clocked = _Clocked()
        task = asyncio.ensure_future(
            in_work_thread(_unless_stopped, stopped, clocked, work, *args, native=native)
        )
        if self.busy is not None:  # however the thread ends, its CPU time is the user's
            task.add_done_callback(functools.partial(_spent, self.busy, self.user_id, clocked))
        left = self.deadline - asyncio.get_running_loop().time()
        try:
            return await asyncio.wait_for(asyncio.shield(task), max(0.0, left))
        except (TimeoutError, asyncio.CancelledError) as exc:
            stopped.set()
            # Cancelled again while the thread ends (anyio cancels at every await) would
            # free the place early: the wait is shielded, and the thread's error dropped.
            with anyio.CancelScope(shield=True):
                while not task.done():
                    if interrupt is not None:
                        interrupt()
                    await asyncio.wait({task}, timeout=INTERRUPT_AGAIN)
                with contextlib.suppress(BaseException):
                    task.result()
            if isinstance(exc, TimeoutError):
                raise timed_out(self.kind, self.seconds) from None
            raise


@dataclass
class _Clocked:
    """The CPU seconds a work thread spent on one piece of work (its own: DuckDB's threads'
    are not counted). CPU, not the time it took: on a busy server that grows, and so would
    every user's bill."""

    seconds: float = 0.0


def _spent(busy: Pace, user_id: int, clocked: _Clocked, _: object) -> None:
    busy.due(user_id, clocked.seconds)


class _Stopped(Exception):
    """The work was stopped before its thread began it."""


def _unless_stopped(
    stopped: threading.Event, clocked: _Clocked, work: Callable[..., T], *args: object
) -> T:
    if stopped.is_set():
        raise _Stopped
    began = time.thread_time()
    try:
        return work(*args)
    finally:
        clocked.seconds = time.thread_time() - began


def timed_out(kind: str, seconds: float) -> WorkTimedOut:
    return WorkTimedOut(
        503,
        f"This took longer than the {seconds:g} s the server gives one of its "
        f"{_WHAT.get(kind, kind)}, and was stopped. Ask for less (filter first), or try later.",
        "work_timed_out",
        retry_after=5,
    )


class Governor:
    """The server's places for each kind of expensive work (one per API server; a user's
    places also count on the others through `shared`)."""

    def __init__(self, settings: Settings, shared: SharedPlaces | None = None) -> None:
        """`shared`: with several API servers on one database, a user's places are counted
        across them too (`backend/core/shared_places.py`)."""
        self.settings = settings
        self.wait = settings.WORK_WAIT_SECONDS
        self.shared = shared
        self._pools: dict[str, _Pool] = {}

    def _pool(self, kind: str) -> _Pool:
        if kind not in self._pools:
            share = self.settings.work_share(kind)
            pace = Pace(share.mb_per_second * 1024 * 1024) if share.mb_per_second else None
            busy = None
            if share.busy_share:
                burst = BUSY_BURST_SECONDS / share.busy_share  # in the pace's seconds
                busy = Pace(share.busy_share, burst_seconds=burst)
            self._pools[kind] = _Pool(share, asyncio.Semaphore(share.total), pace=pace, busy=busy)
        return self._pools[kind]

    def held(self, kind: str, user_id: int) -> int:
        """`user_id`'s places of `kind`, taken or waited for."""
        return self._pool(kind).users[user_id]

    @contextlib.asynccontextmanager
    async def hold(self, kind: str, user_id: int) -> AsyncIterator[Held]:
        """A place for work done within this block."""
        place = await self.take(kind, user_id)
        try:
            yield place.held
        finally:
            place.release()

    async def take(self, kind: str, user_id: int) -> Place:
        """A place for work that outlives a block (a streamed reply): `release` it."""
        pool = self._pool(kind)
        share = pool.share
        what = _WHAT.get(kind, kind)
        mine = f"You already have {share.per_user} {what} in progress, the most one person "
        if pool.users[user_id] >= share.per_user + WAITING_PER_USER:
            raise LimitReached(
                429,
                mine + f"may have at once, and {WAITING_PER_USER} more wait. Wait for them.",
                "too_many_requests",
                retry_after=max(1.0, self.wait),
            )
        pool.users[user_id] += 1
        own = pool.own.setdefault(user_id, asyncio.Semaphore(share.per_user))
        waiting_for = "own"
        give_up = asyncio.get_running_loop().time() + self.wait
        try:
            async with asyncio.timeout(self.wait):
                await own.acquire()
                if pool.busy is not None:
                    waiting_for = "busy"
                    await self._until_busy_allows(pool.busy, kind, user_id, give_up)
                waiting_for = "server"
                await pool.places.acquire()
        except BaseException as exc:
            if waiting_for != "own":  # it holds one of the user's places
                own.release()
            _leave(pool, user_id)
            if not isinstance(exc, TimeoutError):
                raise
            if waiting_for == "busy":  # its sleep outlasted the timeout by a hair
                raise self._too_busy(kind, 1.0) from None
            if waiting_for == "own":
                raise LimitReached(
                    429,
                    mine + f"may have at once, and none ended within {self.wait:g} s. "
                    "Wait for one to finish.",
                    "too_many_requests",
                    retry_after=max(1.0, self.wait),
                ) from None
            logger.warning("Server work %s: every place busy for %.0f s", kind, self.wait)
            raise LimitReached(
                503,
                f"The server is busy with other people's {what}; try again shortly.",
                "server_busy",
                retry_after=max(1.0, self.wait),
            ) from None
        seconds = share.seconds
        deadline = asyncio.get_running_loop().time() + seconds
        held = Held(kind, seconds, deadline, user_id, pool.pace, pool.busy)
        place = Place(pool, user_id, own, held)
        if self.shared is not None:
            await self._share_across_servers(place, kind, give_up)
        return place

    async def _until_busy_allows(self, busy: Pace, kind: str, user_id: int, give_up: float) -> None:
        """Wait until the user's work of `kind` may keep a thread busy again, or a 429 now
        if that is after `give_up`."""
        loop = asyncio.get_running_loop()
        while wait := busy.due(user_id, 0):
            if loop.time() + wait > give_up:
                raise self._too_busy(kind, wait)
            await asyncio.sleep(wait)

    def _too_busy(self, kind: str, wait: float) -> LimitReached:
        share = self._pool(kind).share
        return LimitReached(
            429,
            f"Your {_WHAT.get(kind, kind)} have kept the server busy for more than the "
            f"{share.busy_share:.0%} of its time one person's may take; try again in "
            f"{math.ceil(wait)} s.",
            "too_many_requests",
            retry_after=math.ceil(wait),
        )

    async def _share_across_servers(self, place: Place, kind: str, give_up: float) -> None:
        """The user's place counted on every server too, or a 429 (the local one given back)."""
        assert self.shared is not None
        share = self._pool(kind).share
        left = give_up - asyncio.get_running_loop().time()
        try:
            taken = await self.shared.take(
                kind, place.user_id, share.per_user, share.seconds, max(left, 0.0)
            )
        except BaseException:
            place.release()
            raise
        if taken is None:
            place.release()
            what = _WHAT.get(kind, kind)
            raise LimitReached(
                429,
                f"You already have {share.per_user} {what} in progress on this server and "
                f"the others, the most one person may have at once, and none ended within "
                f"{self.wait:g} s. Wait for one to finish.",
                "too_many_requests",
                retry_after=max(1.0, self.wait),
            )
        place.shared = (self.shared, taken)


def _leave(pool: _Pool, user_id: int) -> None:
    pool.users[user_id] -= 1
    if not pool.users[user_id]:  # nobody holds or waits for the user's semaphore
        del pool.users[user_id]
        del pool.own[user_id]


class Place:
    """A taken place; `release` (idempotent) gives it back, as does its collection."""

    def __init__(self, pool: _Pool, user_id: int, own: asyncio.Semaphore, held: Held) -> None:
        self._pool: _Pool | None = pool
        self.user_id = user_id
        self._own = own
        self.held = held
        self.shared: tuple[SharedPlaces, str] | None = None  # its row across servers

    def release(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.places.release()
            self._own.release()
            _leave(pool, self.user_id)
            if self.shared is not None:
                shared, place_id = self.shared
                shared.release(place_id)

    def release_with(self, owner: object) -> None:
        """Release when `owner` is garbage collected, if nothing released it before."""
        weakref.finalize(owner, self.release)
