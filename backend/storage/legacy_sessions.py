"""Workspaces from before sessions were namespaced by their owner (migration 4).

Such a workspace is `scratch/<session id>`; its session is now `u<owner>-<session id>`.
Each start renames the ones the migration listed, once: a folder whose id was not a
valid session id stays where it is and is never served (`Workspaces` opens keys only).
"""

from __future__ import annotations

import logging

from backend.storage.base import Store
from backend.storage.sessions import check_key
from backend.storage.workspaces import Workspaces

logger = logging.getLogger(__name__)


def adopt_legacy_workspaces(store: Store, workspaces: Workspaces) -> int:
    """Rename the listed legacy workspaces to their keys; returns how many moved."""
    moved = 0
    for old_id, key in store.legacy_sessions():
        if workspaces.adopt_legacy(old_id, check_key(key)):
            moved += 1
        store.forget_legacy_session(old_id)
    if moved:
        logger.info("Renamed %d workspace(s) to their owner-namespaced session keys", moved)
    return moved
