"""Login: username and password in, bearer token out."""

from __future__ import annotations

from fastapi import APIRouter

from backend.api.deps import ServicesDep
from backend.api.errors import ApiError
from backend.core.security import DUMMY_PASSWORD_HASH, create_access_token, verify_password
from backend.models.auth import LoginRequest, Token

router = APIRouter(prefix="/api/auth", tags=["auth"])


@router.post("/login")
def login(body: LoginRequest, services: ServicesDep) -> Token:
    """Exchange a username and password for a JWT access token."""
    user = services.store.get_user(body.username)
    # Hash even for unknown users, so response time does not reveal which names exist.
    valid = verify_password(body.password, user.password_hash if user else DUMMY_PASSWORD_HASH)
    if user is None or not valid:
        raise ApiError(401, "Incorrect username or password.", code="invalid_credentials")
    token = create_access_token(
        user.id, user.password_hash, services.secret_key, services.settings.JWT_EXPIRATION_HOURS
    )
    return Token(access_token=token)
