"""`/api/runs`: chat turns that survive a reload; replay their events, or stop them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query, Response, status
from langchain_core.messages import HumanMessage

from backend.api.deps import ChatServiceDep, CurrentUser, RunsDep
from backend.api.encoders.chat import run_sse
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.api.sse import SSE_HEADERS, SSEResponse, sse_responses
from backend.core.runs import Run, RunRegistry
from backend.core.turn import Turn, TurnRequest
from backend.models.runs import RunCreate, RunPublic
from backend.storage import User
from backend.storage.sessions import client_id

router = APIRouter(prefix="/api/runs", tags=["runs"], responses=CLIENT_ERRORS)


def _public(run: Run) -> RunPublic:
    return RunPublic(
        run_id=run.id,
        status=run.status,
        session_id=client_id(run.session_key),
        conversation_id=run.conversation_id,
        last_seq=run.last_seq,
    )


def _owned_run(runs: RunRegistry, run_id: str, user: User) -> Run:
    run = runs.get(run_id, user.id)
    if run is None:  # someone else's run is as unknown as a missing one
        raise ApiError(404, "Run not found.", code="run_not_found")
    return run


@router.post("", status_code=status.HTTP_202_ACCEPTED)
async def create_run(
    body: RunCreate, user: CurrentUser, chat: ChatServiceDep, runs: RunsDep
) -> RunPublic:
    """Start a turn in the background; follow it with GET /api/runs/{id}/events."""
    request = TurnRequest(
        messages=[HumanMessage(body.message)],
        model=body.model,
        session_id=body.session_id,
        agent_type=body.agent_type,
        parent_message_id=body.parent_message_id,
    )

    async def open_turn() -> Turn:
        return await chat.open_turn(user, request)

    run = await runs.start(user.id, body.session_id, open_turn)
    return _public(run)


@router.get("/{run_id}")
async def read_run(run_id: str, user: CurrentUser, runs: RunsDep) -> RunPublic:
    """A run's status and how many events it has emitted."""
    return _public(_owned_run(runs, run_id, user))


# Documented through `responses`: `response_class=SSEResponse` would type its errors as
# event streams too.
@router.get(
    "/{run_id}/events",
    response_class=Response,
    responses=sse_responses("The run's events, replayed and then live."),
)
async def read_run_events(
    run_id: str,
    user: CurrentUser,
    runs: RunsDep,
    after: Annotated[int, Query(ge=0)] = 0,
    last_event_id: Annotated[int | None, Header(ge=0)] = None,
) -> SSEResponse:
    """Server-sent events numbered above `after` (replayed), then live until the run ends."""
    run = _owned_run(runs, run_id, user)
    start = max(after, last_event_id or 0)

    return SSEResponse(run_sse(run.follow(start), client_id(run.session_key)), headers=SSE_HEADERS)


@router.post("/{run_id}/cancel")
async def cancel_run(run_id: str, user: CurrentUser, runs: RunsDep) -> RunPublic:
    """Stop the run: its sandboxed code is killed and its partial answer kept."""
    run = _owned_run(runs, run_id, user)
    await run.cancel()
    return _public(run)
