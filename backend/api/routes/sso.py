"""Single sign-on through an OpenID Connect provider or an authenticating proxy, and the
sign-in methods the page offers.

`/api/auth/oidc/login` sends the browser to the provider with a fresh state, nonce and
PKCE verifier, kept in a short-lived cookie this server signed; the provider sends it back
to `/api/auth/oidc/callback`, which checks them and the ID token, signs the user in (a new
user at their first sign-on, their groups synced from the token) and returns to the page
with the access token in the URL's fragment (never sent to a server). A refusal returns to
the page with its message there instead.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Cookie, Request, Response
from fastapi.responses import RedirectResponse
from starlette.concurrency import run_in_threadpool

from backend.api.deps import OidcDep, SecretKeyDep, SettingsDep, StoreDep
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.api.login_cookie import set_login_cookie, signed_in
from backend.api.socket_peer import from_trusted_proxy
from backend.core import accounts
from backend.core.oidc import (
    FLOW_SECONDS,
    OidcClient,
    SignInRefused,
    check_state,
    open_flow,
    seal_flow,
)
from backend.core.sso_accounts import proxy_identity, signed_on
from backend.models.auth import Token

router = APIRouter(prefix="/api/auth", tags=["auth"], responses=CLIENT_ERRORS)

FLOW_COOKIE = "pda_oidc"
FLOW_PATH = "/api/auth/oidc"


def _client(client: OidcClient | None) -> OidcClient:
    if client is None:
        raise ApiError(
            404, "Single sign-on is not set up on this server (OIDC_ISSUER).", code="no_sso"
        )
    return client


def _back_to_page(request: Request, fragment: str) -> RedirectResponse:
    """To the UI, with `fragment`; the flow's cookie is spent either way."""
    response = RedirectResponse(f"/#{fragment}", status_code=303)
    response.delete_cookie(
        FLOW_COOKIE, path=FLOW_PATH, secure=request.url.scheme == "https", httponly=True
    )
    return response


def _refused(request: Request, refusal: SignInRefused) -> RedirectResponse:
    return _back_to_page(request, f"sso_error={quote(refusal.message, safe='')}")


@router.get("/methods")
def read_sign_in_methods(settings: SettingsDep, oidc: OidcDep) -> dict[str, Any]:
    """How one may sign in here: by password (everyone, or only the local admin) and by
    single sign-on (with the provider's name), for the sign-in page."""
    sso = None
    if oidc is not None:
        sso = {"name": settings.OIDC_PROVIDER_NAME, "login_url": f"{FLOW_PATH}/login"}
    proxy = bool(settings.TRUSTED_USER_HEADER and settings.TRUSTED_PROXIES)
    return {"password": settings.PASSWORD_SIGN_IN, "oidc": sso, "proxy": proxy}


@router.post("/proxy")
def sign_in_from_proxy(
    request: Request,
    response: Response,
    store: StoreDep,
    settings: SettingsDep,
    secret_key: SecretKeyDep,
) -> Token:
    """Sign in as the user an authenticating proxy names in TRUSTED_USER_HEADER; the
    header counts only on a connection from one of TRUSTED_PROXIES."""
    header = settings.TRUSTED_USER_HEADER
    if not header or not settings.TRUSTED_PROXIES:
        raise ApiError(404, "Sign-in from a proxy is not set up on this server.", code="no_sso")
    name = request.headers.get(header, "").strip()
    if not from_trusted_proxy(request, settings.TRUSTED_PROXIES) or not name:
        raise ApiError(
            401,
            f"No trusted proxy named a user: {header} is believed only from TRUSTED_PROXIES.",
            code="invalid_credentials",
        )
    groups = (
        request.headers.get(settings.TRUSTED_GROUPS_HEADER)
        if settings.TRUSTED_GROUPS_HEADER
        else None
    )
    try:
        user = signed_on(store, settings, proxy_identity(name[:150], groups))
    except SignInRefused as refusal:
        raise ApiError(403, refusal.message, code=refusal.code) from None
    return signed_in(settings, secret_key, user, request, response)


@router.get("/oidc/login", response_class=RedirectResponse, status_code=302)
async def start_oidc_sign_in(
    request: Request, secret_key: SecretKeyDep, oidc: OidcDep
) -> RedirectResponse:
    """Go to the identity provider to sign in (a browser navigation, not an API call)."""
    client = _client(oidc)
    try:
        url, flow = await client.start(client.callback_url(str(request.base_url)))
    except SignInRefused as refusal:
        return _refused(request, refusal)
    response = RedirectResponse(url, status_code=302)
    response.set_cookie(
        FLOW_COOKIE,
        seal_flow(flow, secret_key),
        max_age=FLOW_SECONDS,
        path=FLOW_PATH,
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="lax",  # it must come back with the provider's redirect, a top-level GET
    )
    return response


@router.get("/oidc/callback", response_class=RedirectResponse, status_code=303)
async def finish_oidc_sign_in(
    request: Request,
    store: StoreDep,
    settings: SettingsDep,
    secret_key: SecretKeyDep,
    oidc: OidcDep,
    code: str | None = None,
    state: str | None = None,
    iss: str | None = None,
    error: str | None = None,
    error_description: str | None = None,
    sealed: Annotated[str | None, Cookie(alias=FLOW_COOKIE)] = None,
) -> RedirectResponse:
    """Where the identity provider sends the browser back: signs the user in and returns
    to the page."""
    client = _client(oidc)
    try:
        flow = open_flow(sealed, secret_key)
        check_state(flow, state)
        if error is not None:
            said = (error_description or error)[:300]
            raise SignInRefused(f"The identity provider did not sign you in: {said}.", error)
        if not code:
            raise SignInRefused("The identity provider sent no code back.", "no_code")
        identity = await client.finish(flow, code, iss)
        user = await run_in_threadpool(signed_on, store, settings, identity)
    except SignInRefused as refusal:
        return _refused(request, refusal)
    token = accounts.access_token(user, secret_key, settings.JWT_EXPIRATION_HOURS)
    response = _back_to_page(request, f"sso_token={token}")
    set_login_cookie(settings, token, request, response)
    return response
