"""Signing in and out: username and password in, bearer token out; signing out everywhere;
changing your password."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status
from fastapi.security.utils import get_authorization_scheme_param

from backend.api.deps import (
    AUTH_COOKIE,
    CurrentUser,
    LoginThrottleDep,
    SecretKeyDep,
    SettingsDep,
    StoreDep,
)
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.api.login_cookie import signed_in
from backend.core import accounts
from backend.core.security import dummy_password_hash, verify_password
from backend.core.throttle import LoginKeys, LoginThrottle, login_keys
from backend.models.auth import LoginRequest, PasswordChange, Token
from backend.models.errors import ErrorBody

router = APIRouter(prefix="/api/auth", tags=["auth"], responses=CLIENT_ERRORS)


_THROTTLED = {
    "model": ErrorBody,
    "description": "Too many failed logins: try again after Retry-After seconds.",
    "headers": {"Retry-After": {"schema": {"type": "integer"}}},
}


@router.post("/login", responses={429: _THROTTLED})
def login(
    body: LoginRequest,
    store: StoreDep,
    throttle: LoginThrottleDep,
    settings: SettingsDep,
    secret_key: SecretKeyDep,
    request: Request,
    response: Response,
) -> Token:
    """Exchange a username and password for a JWT access token (also set as a cookie).
    Repeated failures of one user name from one address, or of one address, back off
    exponentially (429 with Retry-After); another address's failures never lock you out."""
    if settings.PASSWORD_SIGN_IN == "admin" and body.username != settings.ADMIN_USERNAME:
        raise ApiError(
            403,
            "Signing in with a password is off on this server: use single sign-on.",
            code="password_sign_in_off",
        )
    keys = _unthrottled_keys(throttle, body.username, request)
    user = store.get_user(body.username)
    # Hash even for unknown users, so response time does not reveal which names exist.
    known = user.password_hash if user else dummy_password_hash(settings.PASSWORD_HASH_ROUNDS)
    valid = verify_password(body.password, known)
    if user is None or not valid:
        throttle.failed(*keys)
        raise ApiError(401, "Incorrect username or password.", code="invalid_credentials")
    throttle.succeeded(*keys)
    if user.disabled:
        raise ApiError(401, "This account is disabled: ask an admin.", code="account_disabled")
    return signed_in(settings, secret_key, user, request, response)


def _unthrottled_keys(throttle: LoginThrottle, username: str, request: Request) -> LoginKeys:
    """The throttle's keys for `username` from this client; a 429 while they are locked."""
    keys = login_keys(username, request.client.host if request.client else None)
    wait = throttle.retry_after(*keys)
    if wait:
        raise ApiError(
            429,
            f"Too many failed attempts: try again in {wait} s.",
            code="too_many_attempts",
            headers={"Retry-After": str(wait)},
        )
    return keys


def _signed_out(request: Request) -> Response:
    """A 204 that clears the login cookie."""
    response = Response(status_code=status.HTTP_204_NO_CONTENT)
    response.delete_cookie(
        AUTH_COOKIE,
        path="/api",
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


@router.post("/logout", status_code=status.HTTP_204_NO_CONTENT)
def logout(request: Request, store: StoreDep, secret_key: SecretKeyDep) -> Response:
    """Sign out: the token presented (bearer or cookie) stops working now, and the cookie
    is cleared."""
    scheme, bearer = get_authorization_scheme_param(request.headers.get("Authorization"))
    presented = {bearer if scheme.lower() == "bearer" else "", request.cookies.get(AUTH_COOKIE)}
    for credential in presented - {"", None}:
        accounts.sign_out(store, secret_key, str(credential))
    return _signed_out(request)


@router.post("/logout-everywhere", status_code=status.HTTP_204_NO_CONTENT)
def logout_everywhere(user: CurrentUser, store: StoreDep, request: Request) -> Response:
    """Sign out everywhere: every access token and every personal API key of yours stops
    working now (this one too), and the cookie is cleared."""
    accounts.sign_out_everywhere(store, user.id)
    return _signed_out(request)


@router.post("/password", responses={429: _THROTTLED})
def change_password(
    body: PasswordChange,
    user: CurrentUser,
    store: StoreDep,
    throttle: LoginThrottleDep,
    settings: SettingsDep,
    secret_key: SecretKeyDep,
    request: Request,
    response: Response,
) -> Token:
    """Change your password (the current one is required; wrong guesses are throttled as
    failed logins). Every other token of yours ends; with `sign_out_everywhere` (the
    default) every API key of yours too. The answer holds a new token for this session
    (also set as the cookie)."""
    keys = _unthrottled_keys(throttle, user.username, request)
    if not verify_password(body.current_password, user.password_hash):
        throttle.failed(*keys)
        raise ApiError(400, "The current password is not right.", code="wrong_password")
    throttle.succeeded(*keys)
    changed = accounts.set_password(
        settings, store, user, body.new_password, end_credentials=body.sign_out_everywhere
    )
    if changed is None:  # deleted meanwhile
        raise ApiError(401, "Invalid or expired token: log in again.", code="invalid_api_key")
    return signed_in(settings, secret_key, changed, request, response)
