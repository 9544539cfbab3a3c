"""Deleting a session deletes all of it; deleting a user deletes all their sessions.

A session lives in many places: its conversation and messages, its step log, its
warm sandbox (live variables), its workspace on disk (uploads, outputs, persisted
variables), the S3 mirror's copy, its graph checkpoints, its RAG passages, its
unfinished tus uploads and its runs' event buffers. `SessionPurge` removes each, so
the same id used again starts empty. The sandbox is stopped before the files go,
so no run can write into a workspace being deleted.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

from starlette.concurrency import run_in_threadpool

from backend.core.agents.runner import AgentRunner
from backend.core.evals.jobs import EvalJobs
from backend.core.runs import RunRegistry
from backend.core.user_files import UserFiles
from backend.files.catalog import WorkspaceCatalog
from backend.storage import Store
from backend.storage.eval_files import EvalSetFiles
from backend.storage.resumable import ResumableUploads
from backend.storage.sessions import SessionKey, check_key
from backend.storage.shared import SharedWorkspaces
from backend.tools.python_coder.tdd.cache import TDD_CACHE, user_cache_dir
from backend.tools.sandbox.pool import SessionExecutors

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionPurge:
    """Each place a session or a user keeps something, named: built once with the services."""

    store: Store
    runs: RunRegistry
    executors: SessionExecutors
    agents: AgentRunner | None  # the graphs' checkpoints and the RAG passages
    catalog: WorkspaceCatalog
    shared: SharedWorkspaces
    uploads: ResumableUploads
    files: UserFiles
    evals: EvalJobs
    eval_set_files: EvalSetFiles
    data_dir: Path

    async def session(self, user_id: int, conversation_id: str) -> bool:
        """Delete the user's conversation and everything of its session; False if the user
        has no such conversation."""
        conversation = self.store.get_conversation(user_id, conversation_id)
        if conversation is None:
            return False
        key = check_key(conversation.session_key)
        active = self.runs.active_for(key)
        if active is not None:
            await active.cancel()
        await self.executors.discard(key)
        deleted = self.store.delete_conversation(user_id, conversation_id)
        await self.leftovers(user_id, key)
        return deleted

    async def user(self, user_id: int) -> None:
        """Every session of the user, then what they kept across sessions: their TDD cache
        and their passage index (before the user's row is deleted)."""
        await self.evals.cancel_user(user_id)  # no question may start in a deleted session
        for conversation in self.store.list_conversations(user_id):
            await self.session(user_id, conversation.id)
        await self.files.remove_user(user_id)  # the Files API's (their rows go with the user)
        await run_in_threadpool(self.eval_set_files.remove_user, user_id)
        cache = user_cache_dir(self.data_dir / TDD_CACHE, user_id)
        await run_in_threadpool(shutil.rmtree, cache, True)
        if self.agents is not None:
            index = self.agents.rag.store.path(user_id)
            await run_in_threadpool(index.unlink, True)

    async def leftovers(self, user_id: int, key: SessionKey) -> None:
        """What the session keeps outside its conversation's rows."""
        conversions = self.catalog.conversions
        if conversions is not None:  # before the files go: no copy may land after them
            await run_in_threadpool(conversions.forget_session, key)
        await self.shared.remove(key)
        await run_in_threadpool(self.uploads.remove_session, key)
        self.runs.forget_session(key)
        self.store.forget_session_containers(key)
        self.store.forget_session_sources(key)
        if self.agents is not None:
            await self.agents.forget(user_id, key)
        logger.info("Deleted session %s and everything it kept", key)
