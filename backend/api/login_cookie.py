"""The login cookie a sign-in sets (by password or single sign-on) and signing out clears."""

from __future__ import annotations

from fastapi import Request, Response

from backend.api.deps import AUTH_COOKIE
from backend.config import Settings
from backend.core import accounts
from backend.models.auth import Token
from backend.storage import User


def signed_in(
    settings: Settings, secret_key: str, user: User, request: Request, response: Response
) -> Token:
    """A new token for the user, also set as the login cookie on `response`."""
    token = accounts.access_token(user, secret_key, settings.JWT_EXPIRATION_HOURS)
    set_login_cookie(settings, token, request, response)
    return Token(access_token=token)


def set_login_cookie(settings: Settings, token: str, request: Request, response: Response) -> None:
    hours = settings.JWT_EXPIRATION_HOURS
    response.set_cookie(
        AUTH_COOKIE,
        token,
        max_age=int(hours * 3600),
        path="/api",
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
