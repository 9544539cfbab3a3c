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
from typing import TYPE_CHECKING

from starlette.concurrency import run_in_threadpool

from backend.storage.sessions import check_key
from backend.tools.python_coder.tdd.cache import TDD_CACHE, user_cache_dir

if TYPE_CHECKING:
    from backend.core.services import Services

logger = logging.getLogger(__name__)


class SessionPurge:
    def __init__(self, services: Services) -> None:
        self.services = services

    async def session(self, user_id: int, conversation_id: str) -> bool:
        """Delete the user's conversation and everything of its session; False if the user
        has no such conversation."""
        services = self.services
        conversation = services.store.get_conversation(user_id, conversation_id)
        if conversation is None:
            return False
        key = check_key(conversation.session_key)
        active = services.runs.active_for(key)
        if active is not None:
            await active.cancel()
        await services.executors.discard(key)
        deleted = services.store.delete_conversation(user_id, conversation_id)
        await self.leftovers(user_id, key)
        return deleted

    async def user(self, user_id: int) -> None:
        """Every session of the user, then what they kept across sessions: their TDD cache
        and their passage index (before the user's row is deleted)."""
        services = self.services
        await services.evals.cancel_user(user_id)  # no question may start in a deleted session
        for conversation in services.store.list_conversations(user_id):
            await self.session(user_id, conversation.id)
        await services.files.remove_user(user_id)  # the Files API's (their rows go with the user)
        await run_in_threadpool(services.eval_sets.files.remove_user, user_id)
        cache = user_cache_dir(services.settings.DATA_DIR / TDD_CACHE, user_id)
        await run_in_threadpool(shutil.rmtree, cache, True)
        if services.chat.agents is not None:
            index = services.chat.agents.rag.store.path(user_id)
            await run_in_threadpool(index.unlink, True)

    async def leftovers(self, user_id: int, key: str) -> None:
        """What the session keeps outside its conversation's rows."""
        services = self.services
        conversions = services.catalog.conversions
        if conversions is not None:  # before the files go: no copy may land after them
            await run_in_threadpool(conversions.forget_session, key)
        await services.shared.remove(key)
        await run_in_threadpool(services.uploads.remove_session, key)
        services.runs.forget_session(key)
        services.store.forget_session_containers(key)
        if services.chat.agents is not None:
            await services.chat.agents.forget(user_id, key)
        logger.info("Deleted session %s and everything it kept", key)
