"""Branches: a turn may follow any earlier message, and its data follows the branch.

Editing a message or regenerating an answer starts a branch (`BranchPoint`): the
new message's history is the path to its parent, not the whole conversation.
Each branch also has its own data state. After every agent turn the session's
workspace is snapshot (`backend/storage/snapshots.py`); before an agent turn,
if the workspace holds another branch's state, the state after the branch's
last agent turn is put back and the session's sandbox restarts from it. The
graph's side forks the same way: an agent turn continues from the LangGraph
checkpoint that the branch's last turn of that agent left (`fork_from`).

Snapshots and restores are disk written on the user's behalf: each is counted
before it is written and must fit in what the user's quota leaves, less what their
runs going on meanwhile were dealt (`room`, `DiskShares.writing`), and the disk's room.
A snapshot that does not fit is skipped, and the answer says so (its `data_state`); a
restore that does not fit is a 507 before anything changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool

from backend.core.governor import Governor, Held
from backend.core.limits import MEGABYTE, LimitReached
from backend.storage import ROOT, Message
from backend.storage.message_tree import MessageTree
from backend.storage.sessions import SessionKey, owner_of
from backend.storage.shared import SharedWorkspaces
from backend.storage.snapshots import NoRoom, TooManyFiles, TurnSnapshots
from backend.tools.sandbox.pool import SessionExecutors

logger = logging.getLogger(__name__)

CLOSE_WAIT = 10.0  # seconds a turn waits for the session's previous one to be recorded
# A checkpoint id no thread has: a graph run from it starts with no memory of other turns.
FRESH_CHECKPOINT = "00000000-0000-0000-0000-000000000000"


class MessageNotFound(Exception):
    """`parent_message_id` names no message of this conversation (callers answer 404)."""


class NotARegeneration(ValueError):
    """A user message named as parent, with other text (callers answer 400)."""


@dataclass(frozen=True)
class BranchPoint:
    """Where a new turn goes in its conversation."""

    parent_id: int | None  # of the new user message: None after the latest, ROOT first
    path: list[Message]  # the conversation before it, along its branch
    regenerate: Message | None = None  # a user message answered again (stored already)
    linear: bool = True  # it continues the latest message, as a turn without a parent does

    @property
    def answers(self) -> int | None:
        """The user message the new answer follows, when it is stored already."""
        return self.regenerate.id if self.regenerate is not None else None


def branch_point(messages: Sequence[Message], parent_id: int | None, text: str) -> BranchPoint:
    """The place of a turn sending `text` after `parent_id` (None: the latest message;
    `ROOT`: a new first message; a user message: regenerate its answer)."""
    tree = MessageTree(messages)
    if parent_id is None:
        return BranchPoint(None, tree.path(tree.latest))
    if parent_id == ROOT:
        return BranchPoint(ROOT, [], linear=not messages)
    if parent_id not in tree:
        raise MessageNotFound(parent_id)
    parent = tree.messages[parent_id]
    if parent.role != "user":
        return BranchPoint(parent_id, tree.path(parent_id), linear=parent_id == tree.latest)
    if text.strip() != parent.content.strip():
        raise NotARegeneration(
            f"Message {parent_id} is your own message: to regenerate its answer, send the"
            f" same text; to edit it, send the new text with parent_message_id"
            f" {parent.parent_id or ROOT}."
        )
    return BranchPoint(parent.parent_id or ROOT, tree.path(parent.parent_id), parent, False)


def fork_from(path: Sequence[Message], agent: str, *, linear: bool) -> str | None:
    """The checkpoint `agent`'s graph continues from: the one its last turn on this branch
    left; None (the thread's latest) for a turn that continues a conversation from
    before branches; `FRESH_CHECKPOINT` when the branch has no turn of that agent."""
    for message in reversed(path):
        meta = message.metadata
        if message.role == "assistant" and meta.get("agent_type") == agent:
            checkpoint = meta.get("checkpoint")
            if isinstance(checkpoint, str) and checkpoint:
                return checkpoint
    return None if linear else FRESH_CHECKPOINT


class BranchStates:
    """Each session's data state, per branch: snapshots after turns, restores before."""

    def __init__(
        self,
        snapshots: TurnSnapshots,
        executors: SessionExecutors,
        shared: SharedWorkspaces,
        room: Callable[[SessionKey], AbstractAsyncContextManager[int]],
        governor: Governor,
    ) -> None:
        """`room(key)`: held while writing for the session's owner, the bytes they may
        still write (`DiskShares.writing`). `governor`: each snapshot and restore takes a
        `snapshot` place (per user, in all, and a time limit)."""
        self.governor = governor
        self.snapshots = snapshots
        self.executors = executors
        self.shared = shared  # with EXECUTOR_BACKEND=ray, S3 holds what the sandbox sees
        self.room = room
        self._open: dict[str, asyncio.Event] = {}  # set when the session's last turn closed

    async def begin(self, key: SessionKey, turn: object) -> asyncio.Event:
        """Wait (at most `CLOSE_WAIT` s) until the session's previous agent turn is
        recorded and snapshot, then mark `turn` open; set the event returned once it is.

        A client may send the next message as soon as it has the last answer's last byte,
        while the turn that wrote it is still being recorded: without the wait, the next
        turn would take the workspace for another branch's. A turn whose events are never
        read closes when it is garbage collected.
        """
        await self.settled(key)
        closed = asyncio.Event()
        self._open[key] = closed
        weakref.finalize(turn, closed.set)
        return closed

    async def settled(self, key: SessionKey) -> None:
        """Wait (at most `CLOSE_WAIT` s) until the session's last agent turn is recorded:
        what reads its answers (an export) sees the one just streamed."""
        previous = self._open.get(key)
        if previous is not None and not previous.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(previous.wait(), CLOSE_WAIT)

    def end(self, key: SessionKey, closed: asyncio.Event) -> None:
        closed.set()
        if self._open.get(key) is closed:
            del self._open[key]

    async def enter(self, key: SessionKey, path: Sequence[Message]) -> bool:
        """Put the state after `path`'s last snapshot turn (none: before any turn) in the
        workspace, unless it is there; True if it had to be restored."""
        target = await run_in_threadpool(self._target, key, path)
        if await run_in_threadpool(self.snapshots.head, key) == target:
            return False
        await self.executors.discard(key)  # its variables are the other branch's
        try:
            async with self._placed(key) as held, self.room(key) as budget:
                await held.run(self.snapshots.restore, key, target, budget)
        except NoRoom as exc:
            raise LimitReached(507, no_room_note(exc, "restored"), _code(exc)) from None
        await self.shared.push(key)
        logger.info("session %s: data state of turn %s restored", key, target)
        return True

    async def keep(self, key: SessionKey, message_id: int) -> str | None:
        """Snapshot the workspace as the state after the turn answered as `message_id`. A
        snapshot that cannot be taken costs that turn's branch its data, never the answer;
        returns why, for a snapshot refused for room (None: taken, or failed otherwise)."""
        try:
            await self.shared.pull(key)  # what the session's actor wrote, with Ray
            async with self._placed(key) as held, self.room(key) as budget:
                cost = await held.run(self.snapshots.take, key, message_id, budget)
        except NoRoom as exc:
            logger.warning("session %s: turn %s not snapshot: %s", key, message_id, exc)
            return no_room_note(exc, "kept")
        except LimitReached as exc:  # the server's snapshots were all busy, or too long
            logger.warning("session %s: turn %s not snapshot: %s", key, message_id, exc)
            return f"This branch's data state was not kept: {exc.message}"
        except Exception as exc:  # a full disk, too many files, S3 unreachable
            level = logging.WARNING if isinstance(exc, OSError | TooManyFiles) else logging.ERROR
            logger.log(level, "session %s: turn %s not snapshot: %r", key, message_id, exc)
            return None
        logger.debug("session %s: snapshot of turn %s: %s", key, message_id, cost)
        return None

    def _placed(self, key: SessionKey) -> AbstractAsyncContextManager[Held]:
        return self.governor.hold("snapshot", owner_of(key))

    def _target(self, key: SessionKey, path: Sequence[Message]) -> int | None:
        return next((m.id for m in reversed(path) if self.snapshots.has(key, m.id)), None)


def no_room_note(exc: NoRoom, done: str) -> str:
    """Why a branch's data state was not `done` ("kept", "restored"), for the user."""
    needed, left = exc.needed / MEGABYTE, exc.left / MEGABYTE
    if exc.bound == "quota":
        return (
            f"This branch's data state was not {done}: it needs {needed:.1f} MB and your "
            f"disk quota (USER_MAX_DISK_MB) has {left:.1f} MB left. Delete files or sessions "
            "you no longer need, or ask an admin to raise your quota."
        )
    return (
        f"This branch's data state was not {done}: it needs {needed:.1f} MB and the "
        f"server's disk has {left:.1f} MB left above the space it keeps free. Try again "
        "later, or ask an admin to free space on the server."
    )


def _code(exc: NoRoom) -> str:
    return "disk_quota_exceeded" if exc.bound == "quota" else "server_disk_full"
