"""User accounts: the admin creates them; everyone can read themselves."""

from __future__ import annotations

from fastapi import APIRouter, status

from backend.api.deps import CurrentAdmin, CurrentUser, StoreDep
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.core.security import hash_password
from backend.models.auth import UserCreate, UserPublic
from backend.storage import User, UsernameTaken

router = APIRouter(prefix="/api/users", tags=["users"], responses=CLIENT_ERRORS)


def _public(user: User) -> UserPublic:
    return UserPublic(id=user.id, username=user.username, is_admin=user.is_admin)


@router.post("", status_code=status.HTTP_201_CREATED)
def create_user(body: UserCreate, store: StoreDep, admin: CurrentAdmin) -> UserPublic:
    """Create a user (admin only)."""
    try:
        user = store.create_user(
            body.username, hash_password(body.password), is_admin=body.is_admin
        )
    except UsernameTaken:
        raise ApiError(409, f"A user named '{body.username}' already exists.") from None
    return _public(user)


@router.get("/me")
async def read_user_me(user: CurrentUser) -> UserPublic:
    """The user the token belongs to."""
    return _public(user)
