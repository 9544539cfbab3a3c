"""Groups (admin only): their limits, the models and MCP servers their members may use,
and their members. Groups an identity provider names are made at a member's first sign-in,
with no limits or rights until an admin gives them some."""

from __future__ import annotations

from fastapi import APIRouter, Response, status
from starlette.concurrency import run_in_threadpool

from backend.api.deps import CurrentAdmin, RecordId, StoreDep
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.models.auth import Limits
from backend.models.groups import (
    GroupCreate,
    GroupMember,
    GroupMemberAdd,
    GroupPublic,
    GroupUpdate,
)
from backend.storage import Group, Store, UserLimits

router = APIRouter(prefix="/api/groups", tags=["groups"], responses=CLIENT_ERRORS)


def _public(store: Store, group: Group, names: dict[int, str] | None = None) -> GroupPublic:
    """The group with its members (`names`: every user's, when already read)."""
    names = names if names is not None else _usernames(store)
    return GroupPublic(
        id=group.id,
        name=group.name,
        description=group.description,
        limits=Limits(**vars(group.limits)),
        models=group.models,
        mcp_server_ids=group.mcp_server_ids,
        created_at=group.created_at,
        members=[
            GroupMember(user_id=m.user_id, username=names.get(m.user_id, ""), origin=m.origin)
            for m in store.group_members(group.id)
        ],
    )


def _usernames(store: Store) -> dict[int, str]:
    return {user.id: user.username for user in store.list_users()}


def _not_found() -> ApiError:
    return ApiError(404, "Group not found.", code="group_not_found")


def _known_servers(store: Store, server_ids: list[int] | None) -> None:
    known = {server.id for server in store.list_mcp_servers()}
    unknown = [s for s in server_ids or () if s not in known]
    if unknown:
        raise ApiError(
            422,
            f"No MCP server has the id {unknown[0]}.",
            code="unknown_mcp_server",
            param="mcp_server_ids",
        )


def _fields(body: GroupCreate | GroupUpdate) -> dict[str, object]:
    fields = body.model_dump(exclude_unset=True, exclude={"limits"})
    if body.limits is not None:
        fields.update(vars(UserLimits(**body.limits.model_dump())))
    return fields


@router.get("")
def read_groups(store: StoreDep, admin: CurrentAdmin) -> list[GroupPublic]:
    """List every group, by name, with its members (admin only)."""
    names = _usernames(store)
    return [_public(store, group, names) for group in store.list_groups()]


@router.post("", status_code=status.HTTP_201_CREATED)
def create_group(body: GroupCreate, store: StoreDep, admin: CurrentAdmin) -> GroupPublic:
    """Create a group (admin only)."""
    _known_servers(store, body.mcp_server_ids)
    return _public(store, store.create_group(**_fields(body)))


@router.get("/{group_id}")
def read_group(group_id: RecordId, store: StoreDep, admin: CurrentAdmin) -> GroupPublic:
    """One group, with its members (admin only)."""
    group = store.get_group(group_id)
    if group is None:
        raise _not_found()
    return _public(store, group)


@router.patch("/{group_id}")
def update_group(
    group_id: RecordId, body: GroupUpdate, store: StoreDep, admin: CurrentAdmin
) -> GroupPublic:
    """Rename a group, or set its limits, models or MCP servers (admin only); it applies to
    its members at their next request."""
    if "mcp_server_ids" in body.model_fields_set:
        _known_servers(store, body.mcp_server_ids)
    group = store.update_group(group_id, **_fields(body))
    if group is None:
        raise _not_found()
    return _public(store, group)


@router.delete("/{group_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_group(group_id: RecordId, store: StoreDep, admin: CurrentAdmin) -> Response:
    """Delete a group; its members keep their accounts (admin only). A group an identity
    provider still names comes back, empty of rights, at a member's next sign-in."""
    if not store.delete_group(group_id):
        raise _not_found()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{group_id}/members", status_code=status.HTTP_201_CREATED)
async def add_group_member(
    group_id: RecordId, body: GroupMemberAdd, store: StoreDep, admin: CurrentAdmin
) -> GroupPublic:
    """Add a user to a group (admin only)."""
    if not await run_in_threadpool(store.add_group_member, group_id, body.user_id):
        if await run_in_threadpool(store.get_group, group_id) is None:
            raise _not_found()
        raise ApiError(422, f"No user has the id {body.user_id}.", code="unknown_user")
    return await run_in_threadpool(read_group, group_id, store, admin)


@router.delete("/{group_id}/members/{user_id}", status_code=status.HTTP_204_NO_CONTENT)
def remove_group_member(
    group_id: RecordId, user_id: RecordId, store: StoreDep, admin: CurrentAdmin
) -> Response:
    """Take a user out of a group (admin only): its limits and rights stop applying to them
    at their next request. A group their identity provider names is given back at their
    next single sign-on: change it there."""
    if not store.remove_group_member(group_id, user_id):
        raise ApiError(404, "That user is not in this group.", code="member_not_found")
    return Response(status_code=status.HTTP_204_NO_CONTENT)
