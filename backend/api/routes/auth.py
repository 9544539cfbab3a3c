"""Login: username and password in, bearer token out."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from backend.api.deps import AUTH_COOKIE, ServicesDep
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.core.security import DUMMY_PASSWORD_HASH, create_access_token, verify_password
from backend.core.throttle import login_keys
from backend.models.auth import LoginRequest, Token
from backend.models.errors import ErrorBody

router = APIRouter(prefix="/api/auth", tags=["auth"], responses=CLIENT_ERRORS)


_THROTTLED = {
    "model": ErrorBody,
    "description": "Too many failed logins: try again after Retry-After seconds.",
    "headers": {"Retry-After": {"schema": {"type": "integer"}}},
}


@router.post("/login", responses={429: _THROTTLED})
def login(body: LoginRequest, services: ServicesDep, request: Request, response: Response) -> Token:
    """Exchange a username and password for a JWT access token (also set as a cookie).
    Repeated failures back off exponentially (429 with Retry-After)."""
    keys = login_keys(body.username, request.client.host if request.client else None)
    wait = services.login_throttle.retry_after(*keys)
    if wait:
        raise ApiError(
            429,
            f"Too many failed logins: try again in {wait} s.",
            code="too_many_attempts",
            headers={"Retry-After": str(wait)},
        )
    user = services.store.get_user(body.username)
    # Hash even for unknown users, so response time does not reveal which names exist.
    valid = verify_password(body.password, user.password_hash if user else DUMMY_PASSWORD_HASH)
    if user is None or not valid:
        services.login_throttle.failed(*keys)
        raise ApiError(401, "Incorrect username or password.", code="invalid_credentials")
    services.login_throttle.succeeded(*keys)
    hours = services.settings.JWT_EXPIRATION_HOURS
    token = create_access_token(user.id, user.password_hash, services.secret_key, hours)
    response.set_cookie(
        AUTH_COOKIE,
        token,
        max_age=int(hours * 3600),
        path="/api",
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return Token(access_token=token)


@router.post("/logout", status_code=status.HTTP_204_NO_CONTENT)
def logout(request: Request) -> Response:
    """Clear the login cookie (the client forgets its bearer token)."""
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    response.delete_cookie(
        AUTH_COOKIE,
        path="/api",
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response
