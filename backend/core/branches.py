"""Branches: a turn may follow any earlier message, and its data follows the branch.

Editing a message or regenerating an answer starts a branch (`BranchPoint`): the
new message's history is the path to its parent, not the whole conversation.
Each branch also has its own data state. After every agent turn the session's
workspace is snapshot (`backend/storage/snapshots.py`); before an agent turn,
if the workspace holds another branch's state, the state after the branch's
last agent turn is put back and the session's sandbox restarts from it. The
graph's side forks the same way: an agent turn continues from the LangGraph
checkpoint that the branch's last turn of that agent left (`fork_from`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool

from backend.storage import ROOT, Message
from backend.storage.message_tree import MessageTree
from backend.storage.snapshots import TooManyFiles, TurnSnapshots
from backend.tools.sandbox.pool import SessionExecutors

logger = logging.getLogger(__name__)

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

    def __init__(self, snapshots: TurnSnapshots, executors: SessionExecutors) -> None:
        self.snapshots = snapshots
        self.executors = executors

    async def enter(self, key: str, path: Sequence[Message]) -> bool:
        """Put the state after `path`'s last snapshot turn (none: before any turn) in the
        workspace, unless it is there; True if it had to be restored."""
        target = await run_in_threadpool(self._target, key, path)
        if await run_in_threadpool(self.snapshots.head, key) == target:
            return False
        await self.executors.discard(key)  # its variables are the other branch's
        await run_in_threadpool(self.snapshots.restore, key, target)
        logger.info("session %s: data state of turn %s restored", key, target)
        return True

    async def keep(self, key: str, message_id: int) -> None:
        """Snapshot the workspace as the state after the turn answered as `message_id`. A
        snapshot that cannot be taken costs that turn's branch its data, never the answer."""
        try:
            cost = await run_in_threadpool(self.snapshots.take, key, message_id)
        except (OSError, TooManyFiles) as exc:
            logger.warning("session %s: turn %s not snapshot: %r", key, message_id, exc)
            return
        logger.debug("session %s: snapshot of turn %s: %s", key, message_id, cost)

    def _target(self, key: str, path: Sequence[Message]) -> int | None:
        return next((m.id for m in reversed(path) if self.snapshots.has(key, m.id)), None)
