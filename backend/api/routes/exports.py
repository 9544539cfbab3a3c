"""A session as a notebook or a script that reruns (`core/export`).

Building one reads the session's input files (their SHA-256) and writes the notebook in
memory: it takes an `export` place from the governor (per user, in all, and a time limit).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from backend.api.client_gone import until_gone
from backend.api.deps import (
    ChatServiceDep,
    FileReader,
    GovernorDep,
    SharedDep,
    StepsDep,
    StoreDep,
    WorkspacesDep,
)
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.api.routes.files import current_session
from backend.core.export import ExportFormat, export_session
from backend.models.common import SessionId
from backend.storage import Message
from backend.storage.message_tree import MessageTree

router = APIRouter(prefix="/api", tags=["sessions"], responses=CLIENT_ERRORS)

_EXPORTS: dict[str, dict[str, object]] = {"application/x-ipynb+json": {}, "text/x-python": {}}


@router.get(
    "/sessions/{session_id}/export",
    response_class=Response,
    responses={200: {"description": "The notebook or the script.", "content": _EXPORTS}},
)
async def export_session_steps(
    session_id: SessionId,
    user: FileReader,
    chat: ChatServiceDep,
    store: StoreDep,
    shared: SharedDep,
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
    key = await current_session(store, shared, user, session_id)
    if chat.branches is not None:
        await chat.branches.settled(key)  # a turn just streamed is recorded
    conversation = store.conversation_for_session(user.id, key, "")
    tree = MessageTree(store.list_messages(conversation.id))
    if leaf is not None and leaf not in tree:
        raise ApiError(404, "Message not found in this conversation.", code="message_not_found")
    kept = await steps.steps(key)
    if leaf is not None or tree.forks():
        runs = branch_runs(tree.path(tree.latest_leaf(leaf) if leaf else tree.latest))
        kept = [step for step in kept if step.run_id in runs]
    async with governor.hold("export", user.id) as held:
        # At the normal priority: with its inputs' digests kept (core/export/inputs.py),
        # an export is mostly Python, holding the GIL, which a low-priority thread
        # descheduled while holding it would keep from everyone (noisy_neighbour: B's
        # p99 5.2x while A exported 70 times a second).
        work = held.run(export_session, workspaces, key, conversation.title, kept, format)
        export = await until_gone(request, work, "session export")
    disposition = f'attachment; filename="{export.filename}"'  # a name of [A-Za-z0-9_-]
    return Response(
        export.body, media_type=export.media_type, headers={"Content-Disposition": disposition}
    )


def branch_runs(path: list[Message]) -> set[str]:
    """The run ids of the steps the answers along a branch show."""
    return {
        str(step.get("run_id"))
        for message in path
        if message.role == "assistant"
        for step in message.metadata.get("steps", [])
        if isinstance(step, dict) and step.get("type") == "execution"
    }
