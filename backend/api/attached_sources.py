"""The `data_sources` extension of /v1's chat completions and responses: the request's
session attaches exactly those sources before its turn (a source the user may not see is
a 404, as in /api/data-sources)."""

from __future__ import annotations

from backend.api.deps import opened_session
from backend.api.errors import ApiError
from backend.core.data_sources import DataSources
from backend.storage import Store, User


def attach_requested(
    store: Store,
    sources: DataSources,
    user: User,
    session_id: str | None,
    source_ids: list[str] | None,
) -> None:
    if source_ids is None:
        return
    if session_id is None:
        raise ApiError(
            400,
            "data_sources attaches sources to a session: give its session_id too.",
            code="invalid_request",
            param="data_sources",
        )
    sources.attach(user.id, opened_session(store, user, session_id), source_ids)
