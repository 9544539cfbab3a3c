"""Shared route dependencies, as `Annotated` aliases so signatures read plainly.

Each reads what it needs from the request itself rather than from other
dependencies: FastAPI solves every `Depends` separately on every request, and
the chat routes are the server's hot path.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPBearer
from starlette.requests import HTTPConnection

from backend.api.errors import ApiError
from backend.config import Settings
from backend.core.accounts import authenticate
from backend.core.chat_service import ChatService
from backend.core.containers import Containers
from backend.core.data_sources import DataSources
from backend.core.evals.jobs import EvalJobs
from backend.core.evals.sets import EvalSets
from backend.core.governor import Governor
from backend.core.group_rights import GroupRights
from backend.core.limits import Limits
from backend.core.oidc import OidcClient
from backend.core.purge import SessionPurge
from backend.core.python_coder_service import PythonCoderService
from backend.core.runs import RunRegistry
from backend.core.services import Services
from backend.core.step_log import StoreStepLog
from backend.core.throttle import LoginThrottle
from backend.core.user_files import UserFiles
from backend.files.catalog import WorkspaceCatalog
from backend.llm import LLMBackend
from backend.models.common import SessionId
from backend.storage import Store, User
from backend.storage.resumable import ResumableUploads
from backend.storage.sessions import SessionKey, session_key
from backend.storage.shared import SharedWorkspaces
from backend.storage.workspaces import Workspaces
from backend.tools.sandbox import SandboxStatus
from backend.tools.sandbox.self_check import SandboxSelfCheck

_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _services(request: HTTPConnection) -> Services:
    services: Services = request.app.state.services
    return services


# Each route takes only the services it uses, so its signature says what it touches.


async def get_settings(request: Request) -> Settings:
    return _services(request).settings


async def get_secret_key(request: Request) -> str:
    return _services(request).secret_key


async def get_store(request: Request) -> Store:
    return _services(request).store


async def get_llm(request: Request) -> LLMBackend:
    return _services(request).llm


async def get_chat_service(request: Request) -> ChatService:
    return _services(request).chat


async def get_runs(request: Request) -> RunRegistry:
    return _services(request).runs


async def get_sandbox(request: Request) -> SandboxStatus:
    return _services(request).sandbox


async def get_sandbox_check(request: Request) -> SandboxSelfCheck:
    return _services(request).sandbox_check


async def get_workspaces(request: Request) -> Workspaces:
    return _services(request).workspaces


async def get_shared(request: Request) -> SharedWorkspaces:
    return _services(request).shared


async def get_catalog(request: Request) -> WorkspaceCatalog:
    return _services(request).catalog


async def get_uploads(request: Request) -> ResumableUploads:
    return _services(request).uploads


async def get_steps(request: Request) -> StoreStepLog:
    return _services(request).steps


async def get_limits(request: Request) -> Limits:
    return _services(request).limits


async def get_governor(request: Request) -> Governor:
    return _services(request).governor


async def get_login_throttle(request: Request) -> LoginThrottle:
    return _services(request).login_throttle


async def get_python_coder(request: Request) -> PythonCoderService:
    return _services(request).python_coder


async def get_files(request: Request) -> UserFiles:
    return _services(request).files


async def get_data_sources(request: Request) -> DataSources:
    return _services(request).data_sources


async def get_containers(request: Request) -> Containers:
    return _services(request).containers


async def get_eval_sets(request: Request) -> EvalSets:
    return _services(request).eval_sets


async def get_evals(request: Request) -> EvalJobs:
    return _services(request).evals


async def get_purge(request: Request) -> SessionPurge:
    return _services(request).purge


async def get_rights(request: Request) -> GroupRights:
    return _services(request).chat.rights


async def get_oidc(request: Request) -> OidcClient | None:
    return _services(request).oidc


SettingsDep = Annotated[Settings, Depends(get_settings)]
SecretKeyDep = Annotated[str, Depends(get_secret_key)]
StoreDep = Annotated[Store, Depends(get_store)]
LLMDep = Annotated[LLMBackend, Depends(get_llm)]
ChatServiceDep = Annotated[ChatService, Depends(get_chat_service)]
RunsDep = Annotated[RunRegistry, Depends(get_runs)]
SandboxDep = Annotated[SandboxStatus, Depends(get_sandbox)]
SandboxCheckDep = Annotated[SandboxSelfCheck, Depends(get_sandbox_check)]  # start-up's run
WorkspacesDep = Annotated[Workspaces, Depends(get_workspaces)]
SharedDep = Annotated[SharedWorkspaces, Depends(get_shared)]  # the workspaces' S3 copy
CatalogDep = Annotated[WorkspaceCatalog, Depends(get_catalog)]
UploadsDep = Annotated[ResumableUploads, Depends(get_uploads)]  # tus uploads in progress
StepsDep = Annotated[StoreStepLog, Depends(get_steps)]
LimitsDep = Annotated[Limits, Depends(get_limits)]
GovernorDep = Annotated[Governor, Depends(get_governor)]  # places for expensive work
LoginThrottleDep = Annotated[LoginThrottle, Depends(get_login_throttle)]
PythonCoderDep = Annotated[PythonCoderService, Depends(get_python_coder)]
PurgeDep = Annotated[SessionPurge, Depends(get_purge)]
FilesDep = Annotated[UserFiles, Depends(get_files)]  # OpenAI's Files API
DataSourcesDep = Annotated[DataSources, Depends(get_data_sources)]  # read-only databases
ContainersDep = Annotated[Containers, Depends(get_containers)]
EvalSetsDep = Annotated[EvalSets, Depends(get_eval_sets)]  # evaluation sets
EvalJobsDep = Annotated[EvalJobs, Depends(get_evals)]  # evaluation runs
RightsDep = Annotated[GroupRights, Depends(get_rights)]  # what a user's groups give them
OidcDep = Annotated[OidcClient | None, Depends(get_oidc)]  # None: no single sign-on


# Set by login; HttpOnly and SameSite=Strict. Only GET routes that read session files
# accept it, so `<img>` plots and download links work in the browser without a header.
AUTH_COOKIE = "pda_token"


def _user_for_token(services: Services, token: str | None) -> User:
    if token is None:
        raise ApiError(
            401,
            "Missing bearer token: log in with POST /api/auth/login and send "
            "'Authorization: Bearer <access_token>' (or a personal API key).",
            code="invalid_api_key",
            headers=_CHALLENGE,
        )
    user = authenticate(services.store, services.secret_key, token)
    if user is None:
        raise ApiError(
            401,
            "Invalid or expired token: log in again.",
            code="invalid_api_key",
            headers=_CHALLENGE,
        )
    if user.disabled:
        raise ApiError(
            401,
            "This account is disabled: ask an admin.",
            code="account_disabled",
            headers=_CHALLENGE,
        )
    return user


class BearerUser(HTTPBearer):
    """The user of the request's bearer token, or a 401.

    A security scheme, so OpenAPI documents the bearer token, that resolves the
    user itself: one dependency per request instead of three.
    """

    def __init__(self, *, cookie: bool = False) -> None:
        super().__init__(
            auto_error=False,
            description="The access token from POST /api/auth/login, or a personal API key",
        )
        self.cookie = cookie  # also accept the login cookie (GET routes that read files)

    async def __call__(self, request: HTTPConnection) -> User:  # type: ignore[override]
        credentials = await super().__call__(request)
        token = credentials.credentials if credentials else None
        if token is None and self.cookie:
            token = request.cookies.get(AUTH_COOKIE)
        return _user_for_token(_services(request), token)


CurrentUser = Annotated[User, Depends(BearerUser())]
FileReader = Annotated[User, Depends(BearerUser(cookie=True))]


async def get_current_admin(user: CurrentUser) -> User:
    if not user.is_admin:
        raise ApiError(403, "Only an admin can do this.", code="forbidden")
    return user


CurrentAdmin = Annotated[User, Depends(get_current_admin)]


# A stored row's id in a path: past a 64-bit integer it could not exist (and PostgreSQL
# would refuse the query).
RecordId = Annotated[int, Path(ge=1, le=2**63 - 1)]


# A session the request names: its owner's key (storage/sessions.py), or a 404.


def owned_session(store: Store, user: User, session_id: str) -> SessionKey:
    """The key of the user's session `session_id`; 404 if the user has no such session."""
    key = session_key(user.id, session_id)
    if store.session_owner(key) != user.id:
        raise ApiError(404, "Session not found.", code="session_not_found")
    return key


def opened_session(store: Store, user: User, session_id: str) -> SessionKey:
    """The key of the user's session `session_id`, started (as an untitled conversation,
    named by its first message) if it is new."""
    key = session_key(user.id, session_id)
    store.conversation_for_session(user.id, key, "")
    return key


async def current_session(
    store: Store, shared: SharedWorkspaces, user: User, session_id: str
) -> SessionKey:
    """The key of the user's session, its workspace brought up to date with the other
    servers'."""
    key = owned_session(store, user, session_id)
    await shared.pull(key)
    return key


async def get_current_session(
    session_id: SessionId, user: FileReader, request: Request
) -> SessionKey:
    services = _services(request)
    return await current_session(services.store, services.shared, user, session_id)


# The reader's session `session_id` in the path, its workspace up to date (or a 404).
CurrentSession = Annotated[SessionKey, Depends(get_current_session)]
