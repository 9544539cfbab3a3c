"""The session steps (`tools/python_coder/steps.py`) kept in the store, for exports."""

from __future__ import annotations

import logging

from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from backend.storage import ConversationNotFound, Store, StoreBusy, StoreFull, StoreUnavailable
from backend.storage.sessions import SessionKey
from backend.tools.python_coder.steps import SessionStep

log = logging.getLogger(__name__)


class StoreStepLog:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def record(self, session_id: SessionKey, step: SessionStep) -> None:
        """Keep `step`. The run it records has succeeded already: a store that cannot keep
        it costs the export that step, never the answer."""
        try:
            await run_in_threadpool(self.store.add_session_step, session_id, step.model_dump())
        except (ConversationNotFound, StoreBusy, StoreFull, StoreUnavailable) as exc:
            log.warning("session %s: step %s not kept for export: %r", session_id, step.run_id, exc)

    async def steps(self, session_id: SessionKey) -> list[SessionStep]:
        return await run_in_threadpool(self.read, session_id)

    def read(self, session_id: SessionKey) -> list[SessionStep]:
        """The session's steps (blocking: it reads the store)."""
        steps = []
        for record in self.store.list_session_steps(session_id):
            try:
                steps.append(SessionStep.model_validate(record))
            except ValidationError:  # written by another version: left out, not a failure
                log.warning("session %s: an unreadable step was left out", session_id)
        return steps
