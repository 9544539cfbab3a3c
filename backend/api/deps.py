"""Shared route dependencies, as `Annotated` aliases so signatures read plainly."""

from __future__ import annotations

from typing import Annotated

from fastapi import Cookie, Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from backend.api.errors import ApiError
from backend.core.chat_service import ChatService
from backend.core.runs import RunRegistry
from backend.core.security import InvalidToken, password_version, read_access_token
from backend.core.services import Services
from backend.storage import Store, User

_bearer = HTTPBearer(auto_error=False, description="The access token from POST /api/auth/login")
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_store(services: ServicesDep) -> Store:
    return services.store


async def get_chat_service(services: ServicesDep) -> ChatService:
    return services.chat


async def get_runs(services: ServicesDep) -> RunRegistry:
    return services.runs


StoreDep = Annotated[Store, Depends(get_store)]
ChatServiceDep = Annotated[ChatService, Depends(get_chat_service)]
RunsDep = Annotated[RunRegistry, Depends(get_runs)]


# Set by login; HttpOnly and SameSite=Strict. Only GET routes that read session files
# accept it, so `<img>` plots and download links work in the browser without a header.
AUTH_COOKIE = "pda_token"


def _user_for_token(services: Services, token: str | None) -> User:
    if token is None:
        raise ApiError(
            401,
            "Missing bearer token: log in with POST /api/auth/login and send "
            "'Authorization: Bearer <access_token>'.",
            code="invalid_api_key",
            headers=_CHALLENGE,
        )
    try:
        user_id, version = read_access_token(token, services.secret_key)
    except InvalidToken:
        user = None
    else:
        user = services.store.get_user_by_id(user_id)
    # A token issued before a password change names the old password's version.
    if user is None or password_version(user.password_hash) != version:
        raise ApiError(
            401,
            "Invalid or expired token: log in again.",
            code="invalid_api_key",
            headers=_CHALLENGE,
        )
    return user


async def get_current_user(
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> User:
    return _user_for_token(services, credentials.credentials if credentials else None)


async def get_file_reader(
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    cookie: Annotated[str | None, Cookie(alias=AUTH_COOKIE, include_in_schema=False)] = None,
) -> User:
    """The bearer token's user, or the login cookie's (GET routes that read files only)."""
    return _user_for_token(services, credentials.credentials if credentials else cookie)


CurrentUser = Annotated[User, Depends(get_current_user)]
FileReader = Annotated[User, Depends(get_file_reader)]


async def get_current_admin(user: CurrentUser) -> User:
    if not user.is_admin:
        raise ApiError(403, "Only an admin can do this.", code="forbidden")
    return user


CurrentAdmin = Annotated[User, Depends(get_current_admin)]
