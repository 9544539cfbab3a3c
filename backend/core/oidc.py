"""Single sign-on with OpenID Connect: the authorization code flow with PKCE, `state` and
`nonce`, and the ID token checked against the provider's published keys.

Authlib builds the authorization URL and redeems the code; joserfc checks the ID token's
signature and claims. The provider's discovery document and keys are cached; a token
signed with a key the cache lacks fetches the keys again (at most every `KEYS_REFRESH`
seconds), so a provider that rotates its keys keeps working. Every refusal is a
`SignInRefused` whose message says what went wrong, for the sign-in page to show.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any

import httpx
import jwt as pyjwt
from authlib.integrations.base_client import OAuthError
from authlib.integrations.httpx_client import AsyncOAuth2Client
from joserfc import jwt
from joserfc.errors import (
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import KeySet

from backend.config import Settings

FLOW_SECONDS = 600  # a sign-in must come back from the provider within this
LEEWAY = 60  # seconds of clock difference allowed in the ID token's times
METADATA_SECONDS = 3600  # the discovery document is fetched again after this
KEYS_REFRESH = 30.0  # seconds: the least time between two fetches of the provider's keys
HTTP_TIMEOUT = 10.0  # seconds for each call to the provider
MAX_EXCHANGES = 16  # codes redeemed at the same time, by everyone
MAX_GROUPS = 200  # of a group claim: the rest are left out
# Asymmetric algorithms only: a provider's ID token is checked with its published keys.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
_FLOW_AUDIENCE = "pda-oidc-flow"


class SignInRefused(Exception):
    """Single sign-on failed; `message` says why, for the person signing in."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class Flow:
    """One sign-in between leaving for the provider and coming back: kept by the browser
    in a cookie this server signed, so any of several API servers can finish it."""

    state: str
    nonce: str
    code_verifier: str
    redirect_uri: str


@dataclass(frozen=True)
class Identity:
    """Who the provider says signed in."""

    issuer: str
    subject: str
    username: str  # a new user's name: the username claim, else email, else the subject
    email: str
    display_name: str
    groups: list[str] | None  # None: the provider sent no group claim (groups not synced)


def seal_flow(flow: Flow, secret_key: str) -> str:
    claims = {**vars(flow), "aud": _FLOW_AUDIENCE, "exp": int(time.time()) + FLOW_SECONDS}
    return pyjwt.encode(claims, secret_key, algorithm="HS256")


def open_flow(sealed: str | None, secret_key: str) -> Flow:
    """The flow the browser's cookie holds; a refusal if it has none, or a stale one."""
    if not sealed:
        raise SignInRefused(
            "This sign-in was not started here, or its cookie was lost: start again from the "
            "sign-in page.",
            "sign_in_not_started",
        )
    try:
        claims = pyjwt.decode(sealed, secret_key, algorithms=["HS256"], audience=_FLOW_AUDIENCE)
        return Flow(
            claims["state"], claims["nonce"], claims["code_verifier"], claims["redirect_uri"]
        )
    except (pyjwt.InvalidTokenError, KeyError):
        raise SignInRefused(
            f"This sign-in took longer than {FLOW_SECONDS // 60} minutes, or its cookie is not "
            "this server's: start again.",
            "sign_in_expired",
        ) from None


def check_state(flow: Flow, returned: str | None) -> None:
    if not returned or not hmac.compare_digest(flow.state, returned):
        raise SignInRefused(
            "The sign-in's state does not match the one this browser started with (a "
            "forged or replayed response): start again from the sign-in page.",
            "wrong_state",
        )


class OidcClient:
    """The provider named by OIDC_ISSUER, as this server's client of it."""

    def __init__(self, settings: Settings, transport: httpx.AsyncBaseTransport | None = None):
        self.issuer = settings.OIDC_ISSUER.rstrip("/") if settings.OIDC_ISSUER else ""
        self.client_id = settings.OIDC_CLIENT_ID
        self._secret = settings.OIDC_CLIENT_SECRET
        scopes = settings.OIDC_SCOPES.split()
        self.scope = " ".join(["openid", *(s for s in scopes if s != "openid")])
        self.username_claim = settings.OIDC_USERNAME_CLAIM
        self.groups_claim = settings.OIDC_GROUPS_CLAIM
        self.redirect_url = settings.OIDC_REDIRECT_URL
        self._transport = transport
        self.keys_refresh = KEYS_REFRESH
        # Codes redeemed at once: the callback needs no credential, so this bounds what
        # anyone can make this server ask of the provider (each call is also timed).
        self._exchanges = asyncio.Semaphore(MAX_EXCHANGES)
        self._metadata: tuple[float, dict[str, Any]] | None = None
        self._keys: tuple[float, KeySet] | None = None

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            timeout=HTTP_TIMEOUT, transport=self._transport, follow_redirects=False
        )

    async def _get_json(self, url: str, what: str) -> dict[str, Any]:
        try:
            async with self._http() as http:
                response = await http.get(url)
            response.raise_for_status()
            found = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise SignInRefused(
                f"The identity provider's {what} could not be read ({type(exc).__name__}): "
                "try again, or tell an admin (OIDC_ISSUER).",
                "provider_unavailable",
            ) from None
        if not isinstance(found, dict):
            raise SignInRefused(f"The identity provider's {what} is not JSON.", "provider_invalid")
        return found

    async def metadata(self) -> dict[str, Any]:
        """The discovery document, whose issuer must be OIDC_ISSUER exactly."""
        if self._metadata and time.monotonic() - self._metadata[0] < METADATA_SECONDS:
            return self._metadata[1]
        found = await self._get_json(
            f"{self.issuer}/.well-known/openid-configuration", "discovery document"
        )
        if str(found.get("issuer", "")).rstrip("/") != self.issuer:
            raise SignInRefused(
                f"The identity provider calls itself '{found.get('issuer')}', not "
                f"'{self.issuer}' (OIDC_ISSUER): an admin must fix the setting.",
                "unknown_issuer",
            )
        for endpoint in ("authorization_endpoint", "token_endpoint", "jwks_uri"):
            if not isinstance(found.get(endpoint), str):
                raise SignInRefused(
                    f"The identity provider's discovery document has no {endpoint}.",
                    "provider_invalid",
                )
        self._metadata = (time.monotonic(), found)
        return found

    async def _key_set(self, refresh: bool) -> KeySet:
        now = time.monotonic()
        if self._keys and not (refresh and now - self._keys[0] >= self.keys_refresh):
            return self._keys[1]
        metadata = await self.metadata()
        published = await self._get_json(metadata["jwks_uri"], "signing keys")
        try:
            keys = KeySet.import_key_set(published)  # type: ignore[arg-type]
        except (JoseError, ValueError, TypeError, KeyError):
            raise SignInRefused(
                "The identity provider's signing keys could not be read.", "provider_invalid"
            ) from None
        self._keys = (now, keys)
        return keys

    def callback_url(self, base_url: str) -> str:
        return self.redirect_url or f"{base_url.rstrip('/')}/api/auth/oidc/callback"

    async def start(self, redirect_uri: str) -> tuple[str, Flow]:
        """Where to send the browser, and the flow to keep until it comes back."""
        metadata = await self.metadata()
        flow = Flow(
            state=secrets.token_urlsafe(24),
            nonce=secrets.token_urlsafe(24),
            code_verifier=secrets.token_urlsafe(48),
            redirect_uri=redirect_uri,
        )
        async with self._oauth(redirect_uri) as client:
            url, _ = client.create_authorization_url(
                metadata["authorization_endpoint"],
                state=flow.state,
                code_verifier=flow.code_verifier,
                nonce=flow.nonce,
            )
        return url, flow

    def _oauth(self, redirect_uri: str) -> AsyncOAuth2Client:
        return AsyncOAuth2Client(
            client_id=self.client_id,
            client_secret=self._secret,
            scope=self.scope,
            redirect_uri=redirect_uri,
            code_challenge_method="S256",
            timeout=HTTP_TIMEOUT,
            transport=self._transport,
        )

    async def finish(self, flow: Flow, code: str, issuer: str | None) -> Identity:
        """Redeem the code and check the ID token; `issuer`: the `iss` the provider sent
        back with the code, if any (RFC 9207), which must be ours."""
        if issuer is not None and issuer.rstrip("/") != self.issuer:
            raise _unknown_issuer(issuer)
        metadata = await self.metadata()
        if self._exchanges.locked():
            raise SignInRefused(
                "Too many sign-ins are being finished at once: try again in a moment.", "busy"
            )
        try:
            async with self._exchanges, self._oauth(flow.redirect_uri) as client:
                token = await client.fetch_token(
                    metadata["token_endpoint"],
                    grant_type="authorization_code",
                    code=code,
                    code_verifier=flow.code_verifier,
                )
        except (OAuthError, httpx.HTTPError, ValueError) as exc:
            raise SignInRefused(
                f"The identity provider refused the sign-in's code ({_reason(exc)}): start again.",
                "code_refused",
            ) from None
        id_token = token.get("id_token")
        if not isinstance(id_token, str):
            raise SignInRefused("The identity provider sent no ID token.", "no_id_token")
        return self._identity(await self.verify(id_token, flow.nonce))

    async def verify(self, id_token: str, nonce: str) -> dict[str, Any]:
        """The ID token's claims once its signature (by a published key) and its issuer,
        audience, times and nonce hold."""
        try:
            decoded = jwt.decode(id_token, await self._key_set(False), algorithms=ALGORITHMS)
        except JoseError:
            try:  # perhaps signed with a key published since: the provider rotated its keys
                decoded = jwt.decode(id_token, await self._key_set(True), algorithms=ALGORITHMS)
            except (JoseError, ValueError):
                raise _not_genuine() from None
        except ValueError:
            raise _not_genuine() from None
        claims = dict(decoded.claims)
        registry = jwt.JWTClaimsRegistry(
            leeway=LEEWAY,
            iss={"essential": True, "value": self.issuer},
            aud={"essential": True, "value": self.client_id},
            sub={"essential": True},
            exp={"essential": True},
            iat={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise SignInRefused(
                "The identity provider's ID token has expired (check that this server's "
                "clock is right): sign in again.",
                "id_token_expired",
            ) from None
        except (InvalidClaimError, MissingClaimError) as exc:
            raise _bad_claim(exc.claim, claims) from None
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.client_id:
            raise _bad_claim("azp", claims)
        return claims

    def _identity(self, claims: dict[str, Any]) -> Identity:
        subject = str(claims["sub"])
        email = _text(claims.get("email"))
        username = _text(claims.get(self.username_claim)) or email or subject
        groups = None
        if self.groups_claim and self.groups_claim in claims:
            groups = group_names(claims[self.groups_claim])
        return Identity(
            issuer=self.issuer,
            subject=subject,
            username=username,
            email=email,
            display_name=_text(claims.get("name")),
            groups=groups,
        )


def _text(value: object) -> str:
    return value.strip()[:200] if isinstance(value, str) else ""


def group_names(value: object) -> list[str]:
    """A group claim: a list of names (or one name, or a comma-separated string)."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list):
        return []
    names = [name.strip()[:100] for name in value if isinstance(name, str) and name.strip()]
    return names[:MAX_GROUPS]


def _reason(exc: Exception) -> str:
    if isinstance(exc, OAuthError):
        return exc.error or "refused"
    return type(exc).__name__


def _not_genuine() -> SignInRefused:
    return SignInRefused(
        "The ID token's signature does not match the identity provider's keys (it was "
        "altered, or is not from this provider): sign-in refused.",
        "id_token_invalid",
    )


def _unknown_issuer(issuer: object) -> SignInRefused:
    return SignInRefused(
        f"The sign-in came from an unknown issuer ('{issuer}'); this server trusts only its "
        "own identity provider (OIDC_ISSUER).",
        "unknown_issuer",
    )


def _bad_claim(claim: str, claims: dict[str, Any]) -> SignInRefused:
    if claim == "iss":
        return _unknown_issuer(claims.get("iss"))
    if claim == "nonce":
        return SignInRefused(
            "The ID token's nonce does not match this sign-in's (a replayed or forged "
            "token): start again from the sign-in page.",
            "wrong_nonce",
        )
    if claim in ("aud", "azp"):
        return SignInRefused(
            "The ID token was issued to another application, not to this server (OIDC_CLIENT_ID).",
            "wrong_audience",
        )
    return SignInRefused(f"The ID token's '{claim}' claim is missing or wrong.", "id_token_invalid")
