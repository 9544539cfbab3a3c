"""The ID token check against a real OpenID provider (oidc-provider on loopback): its
discovery document and published keys are read from it, and tokens signed with its own
private key are refused when tampered with, expired, for another issuer, audience or
nonce; a key it rotated to is fetched when a token names it."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from backend.config import Settings
from backend.core.oidc import MAX_GROUPS, OidcClient, SignInRefused, group_names
from tests.support.oidc_provider import OidcProvider

CLIENT = {
    "client_id": "pda-test",
    "client_secret": "a-client-secret-of-32-characters!",
    "redirect_uris": ["http://127.0.0.1:9/api/auth/oidc/callback"],
    "token_endpoint_auth_method": "client_secret_basic",
}
NONCE = "the-nonce-of-this-sign-in"


@pytest.fixture(scope="module")
def provider(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcProvider]:
    with OidcProvider(tmp_path_factory.mktemp("op"), clients=[CLIENT]) as started:
        yield started


@pytest.fixture
def client(provider: OidcProvider, tmp_path: Path) -> OidcClient:
    settings = Settings(
        DATA_DIR=tmp_path,
        OIDC_ISSUER=provider.issuer,
        OIDC_CLIENT_ID=CLIENT["client_id"],
        OIDC_CLIENT_SECRET=CLIENT["client_secret"],
    )
    return OidcClient(settings)


def _signed(provider: OidcProvider, **changes: Any) -> str:
    """An ID token signed with the provider's own (first) private key."""
    keys = json.loads((provider.root / "keys.json").read_text())
    key = KeySet.import_key_set(keys).keys[0]
    now = int(time.time())
    claims = {
        "iss": provider.issuer,
        "aud": CLIENT["client_id"],
        "sub": "alice",
        "iat": now,
        "exp": now + 300,
        "nonce": NONCE,
        "groups": ["analysts"],
    }
    claims.update(changes)
    return jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)


def _refusal(client: OidcClient, token: str) -> SignInRefused:
    with pytest.raises(SignInRefused) as refused:
        asyncio.run(client.verify(token, NONCE))
    return refused.value


def test_a_genuine_token_gives_its_claims(client: OidcClient, provider: OidcProvider) -> None:
    claims = asyncio.run(client.verify(_signed(provider), NONCE))
    assert (claims["sub"], claims["groups"]) == ("alice", ["analysts"])


def test_a_tampered_token_is_refused(client: OidcClient, provider: OidcProvider) -> None:
    header, payload, signature = _signed(provider).split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["groups"] = ["admins"]  # a member of a group they are not in
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    refusal = _refusal(client, f"{header}.{forged}.{signature}")
    assert refusal.code == "id_token_invalid"
    assert "signature does not match the identity provider's keys" in refusal.message


@pytest.mark.parametrize(
    ("changes", "code", "words"),
    [
        ({"exp": int(time.time()) - 3600}, "id_token_expired", "ID token has expired"),
        ({"nonce": "another-sign-in"}, "wrong_nonce", "nonce does not match"),
        ({"iss": "http://127.0.0.1:1"}, "unknown_issuer", "unknown issuer"),
        ({"aud": "another-app"}, "wrong_audience", "issued to another application"),
        ({"aud": [CLIENT["client_id"], "another-app"]}, "wrong_audience", "another application"),
    ],
)
def test_a_token_for_another_sign_in_is_refused(
    client: OidcClient, provider: OidcProvider, changes: dict[str, Any], code: str, words: str
) -> None:
    refusal = _refusal(client, _signed(provider, **changes))
    assert (refusal.code, words in refusal.message) == (code, True), refusal.message


def test_a_rotated_key_is_fetched_when_a_token_names_it(
    client: OidcClient, provider: OidcProvider
) -> None:
    client.keys_refresh = 0  # not the 30 s between two fetches that a server keeps
    asyncio.run(client.verify(_signed(provider), NONCE))  # the keys before, cached
    provider.rotate_keys()
    claims = asyncio.run(client.verify(_signed(provider), NONCE))  # by the new key
    assert claims["sub"] == "alice"


def test_a_token_is_not_checked_with_a_key_it_names_itself(
    client: OidcClient, provider: OidcProvider
) -> None:
    stranger = RSAKey.generate_key(2048, parameters={"kid": "mine"})
    now = int(time.time())
    claims = {"iss": provider.issuer, "aud": CLIENT["client_id"], "sub": "x", "iat": now}
    token = jwt.encode({"alg": "RS256", "kid": "mine"}, {**claims, "exp": now + 60}, stranger)
    assert _refusal(client, token).code == "id_token_invalid"
    # Nor with no key at all ("alg": "none").
    header = base64.urlsafe_b64encode(b'{"alg":"none"}').rstrip(b"=").decode()
    body = base64.urlsafe_b64encode(json.dumps({**claims, "exp": now + 60}).encode())
    assert _refusal(client, f"{header}.{body.rstrip(b'=').decode()}.").code == "id_token_invalid"


def test_a_group_claim_is_read_as_names_and_bounded() -> None:
    assert group_names(["analysts", " ops ", "", 7, None]) == ["analysts", "ops"]
    assert group_names("analysts, ops") == ["analysts", "ops"]  # a proxy's header, or a string
    assert group_names({"not": "a list"}) == []
    assert len(group_names([f"g{i}" for i in range(MAX_GROUPS + 50)])) == MAX_GROUPS
