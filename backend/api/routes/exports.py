"""A session as a notebook or a script that reruns (`core/export`).

Building one reads the session's messages and steps from the store and its input files
(their SHA-256), and writes the notebook in memory: all of it in the thread of an `export`
place from the governor (per user, in all, a time limit and a share of a thread's time).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from backend.api.client_gone import until_gone
from backend.api.deps import (
    ChatServiceDep,
    CurrentSession,
    FileReader,
    GovernorDep,
    StepsDep,
    StoreDep,
    WorkspacesDep,
)
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.core.export import Export, ExportFormat, export_session
from backend.core.step_log import StoreStepLog
from backend.storage import Message, Store
from backend.storage.message_tree import MessageTree
from backend.storage.sessions import SessionKey
from backend.storage.workspaces import Workspaces

router = APIRouter(prefix="/api", tags=["sessions"], responses=CLIENT_ERRORS)

_EXPORTS: dict[str, dict[str, object]] = {"application/x-ipynb+json": {}, "text/x-python": {}}


@router.get(
    "/sessions/{session_id}/export",
    response_class=Response,
    responses={200: {"description": "The notebook or the script.", "content": _EXPORTS}},
)
async def export_session_steps(
    key: CurrentSession,
    user: FileReader,
    chat: ChatServiceDep,
    store: StoreDep,
    steps: StepsDep,
    workspaces: WorkspacesDep,
    governor: GovernorDep,
    request: Request,
    format: Annotated[ExportFormat, Query()] = "ipynb",
    leaf: Annotated[int | None, Query(ge=1, description="Export this message's branch.")] = None,
) -> Response:
    """The session's successful steps as a notebook (`ipynb`) or a script (`py`) that reruns
    on copies of its input files; the header records their SHA-256 and the library versions.
    A conversation with branches exports one: the branch through `leaf`, or its latest."""
    if chat.branches is not None:
        await chat.branches.settled(key)  # a turn just streamed is recorded

    async def built() -> Export:
        async with governor.hold("export", user.id) as held:
            # All of it in the place's thread, the store's reads too, so that the kind's
            # busy_share counts all of it and none is on the event loop. At the normal
            # priority: an export is mostly Python, holding the GIL, which a low-priority
            # thread descheduled while holding it would keep from everyone (noisy_neighbour:
            # B's p99 5.2x while A exported 70 times a second).
            return await held.run(build, store, steps, workspaces, user.id, key, leaf, format)

    export = await until_gone(request, built(), "session export")  # its wait for a place too
    disposition = f'attachment; filename="{export.filename}"'  # a name of [A-Za-z0-9_-]
    return Response(
        export.body, media_type=export.media_type, headers={"Content-Disposition": disposition}
    )


def build(
    store: Store,
    steps: StoreStepLog,
    workspaces: Workspaces,
    user_id: int,
    key: SessionKey,
    leaf: int | None,
    format: ExportFormat,
) -> Export:
    """The export of session `key`'s steps, of the branch through `leaf` or its latest
    (blocking: it reads the store and the session's files)."""
    conversation = store.conversation_for_session(user_id, key, "")
    tree = MessageTree(store.list_messages(conversation.id))
    if leaf is not None and leaf not in tree:
        raise ApiError(404, "Message not found in this conversation.", code="message_not_found")
    kept = steps.read(key)
    if leaf is not None or tree.forks():
        runs = branch_runs(tree.path(tree.latest_leaf(leaf) if leaf else tree.latest))
        kept = [step for step in kept if step.run_id in runs]
    return export_session(workspaces, key, conversation.title, kept, format)


def branch_runs(path: list[Message]) -> set[str]:
    """The run ids of the steps the answers along a branch show."""
    return {
        str(step.get("run_id"))
        for message in path
        if message.role == "assistant"
        for step in message.metadata.get("steps", [])
        if isinstance(step, dict) and step.get("type") == "execution"
    }
