"""User accounts: admins list, create, disable, delete and limit them, and reset their
passwords; everyone can read themselves."""

from __future__ import annotations

from fastapi import APIRouter, Response, status

from backend.api.deps import (
    CurrentAdmin,
    CurrentUser,
    PurgeDep,
    RecordId,
    SettingsDep,
    StoreDep,
)
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.core import accounts
from backend.core.security import hash_password
from backend.models.auth import (
    Limits,
    PasswordReset,
    UserCreate,
    UserGroup,
    UserPublic,
    UserUpdate,
)
from backend.storage import Store, User, UserLimits

router = APIRouter(prefix="/api/users", tags=["users"], responses=CLIENT_ERRORS)


def _groups(store: Store, user_id: int | None = None) -> dict[int, list[UserGroup]]:
    """Each user's groups (of one user, or of everyone), by user id."""
    names = {group.id: group.name for group in store.list_groups()}
    found: dict[int, list[UserGroup]] = {}
    for group_id, member in store.memberships(user_id):
        group = UserGroup(id=group_id, name=names.get(group_id, ""), origin=member.origin)
        found.setdefault(member.user_id, []).append(group)
    return found


def _public(user: User, groups: dict[int, list[UserGroup]] | None = None) -> UserPublic:
    limits = user.limits
    return UserPublic(
        id=user.id,
        username=user.username,
        is_admin=user.is_admin,
        disabled=user.disabled,
        created_at=user.created_at,
        limits=Limits(
            max_sandboxes=limits.max_sandboxes,
            max_runs=limits.max_runs,
            max_disk_mb=limits.max_disk_mb,
            max_tokens_per_day=limits.max_tokens_per_day,
            max_sandbox_seconds_per_day=limits.max_sandbox_seconds_per_day,
        ),
        email=user.email,
        display_name=user.display_name,
        groups=(groups or {}).get(user.id, []),
    )


def _not_found() -> ApiError:
    return ApiError(404, "User not found.", code="user_not_found")


def _not_yourself(admin: User, user_id: int, what: str) -> None:
    # An admin who locked themselves out might leave the server with no admin at all.
    if user_id == admin.id:
        raise ApiError(409, f"You cannot {what} your own account.", code="own_account")


@router.get("")
def read_users(store: StoreDep, admin: CurrentAdmin) -> list[UserPublic]:
    """List every user, oldest first, with their groups (admin only)."""
    groups = _groups(store)
    return [_public(user, groups) for user in store.list_users()]


@router.post("", status_code=status.HTTP_201_CREATED)
def create_user(
    body: UserCreate, store: StoreDep, settings: SettingsDep, admin: CurrentAdmin
) -> UserPublic:
    """Create a user (admin only)."""
    hashed = hash_password(body.password, settings.PASSWORD_HASH_ROUNDS)
    user = store.create_user(body.username, hashed, is_admin=body.is_admin)
    return _public(user)


@router.get("/me")
def read_user_me(user: CurrentUser, store: StoreDep) -> UserPublic:
    """The user the token belongs to, with their groups."""
    return _public(user, _groups(store, user.id))


@router.patch("/{user_id}")
def update_user(
    user_id: RecordId, body: UserUpdate, store: StoreDep, admin: CurrentAdmin
) -> UserPublic:
    """Disable or re-enable a user, or set their limits (admin only)."""
    if body.disabled:
        _not_yourself(admin, user_id, "disable")
    limits = None
    if body.limits is not None:
        limits = UserLimits(**body.limits.model_dump())
    user = store.update_user(user_id, disabled=body.disabled, limits=limits)
    if user is None:
        raise _not_found()
    return _public(user, _groups(store, user.id))


@router.put("/{user_id}/password", status_code=status.HTTP_204_NO_CONTENT)
def reset_user_password(
    user_id: RecordId,
    body: PasswordReset,
    store: StoreDep,
    settings: SettingsDep,
    admin: CurrentAdmin,
) -> Response:
    """Set a user's password; every signed-in session and personal API key of theirs ends
    (admin only)."""
    user = store.get_user_by_id(user_id)
    if user is None:
        raise _not_found()
    if accounts.set_password(settings, store, user, body.password, end_credentials=True) is None:
        raise _not_found()  # deleted meanwhile
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.delete("/{user_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_user(
    user_id: RecordId, store: StoreDep, purge: PurgeDep, admin: CurrentAdmin
) -> Response:
    """Delete a user with all their conversations, files and API keys (admin only)."""
    _not_yourself(admin, user_id, "delete")
    if not await accounts.delete_user(store, purge, user_id):
        raise _not_found()
    return Response(status_code=status.HTTP_204_NO_CONTENT)
