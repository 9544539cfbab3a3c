"""Single sign-on in Chromium against a real OpenID provider (oidc-provider on loopback):
"Sign in with …" on the sign-in page, a user made at their first sign-in with the
provider's name, email and groups, groups synced at the next sign-in (added and removed),
and a forged state or a provider's refusal shown on the sign-in page. With
PASSWORD_SIGN_IN=admin only the local admin may use a password."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.conftest import ADMIN_PASSWORD, write_replies
from tests.support.live_server import LiveServer, free_port
from tests.support.oidc_provider import OidcProvider
from tests.support.tampering_proxy import (
    Tamper,
    TamperingProxy,
    altered,
    changed,
    expired,
)
from tests.ui.browser import CSP_WATCH, ConsoleWatch

SECRET = "the-test-client-secret-of-32-chars"
ALICE = {"name": "Alice Analyst", "email": "alice@example.org", "groups": ["analysts", "ops"]}


@dataclass
class Sso:
    server: LiveServer
    provider: OidcProvider
    proxy: TamperingProxy  # between the provider and everyone else


@pytest.fixture(scope="module")
def sso(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sso]:
    root = tmp_path_factory.mktemp("sso")
    server = LiveServer(
        root / "data",
        LLM_BACKEND="scripted",
        SCRIPTED_REPLIES=write_replies(root / "replies.json", []),
        ADMIN_PASSWORD=ADMIN_PASSWORD,
        OIDC_CLIENT_ID="pda",
        OIDC_CLIENT_SECRET=SECRET,
        OIDC_PROVIDER_NAME="Test IdP",
        PASSWORD_SIGN_IN="admin",
    )
    client = {
        "client_id": "pda",
        "client_secret": SECRET,
        "redirect_uris": [f"{server.url}/api/auth/oidc/callback"],
        "token_endpoint_auth_method": "client_secret_basic",
    }
    with TamperingProxy(free_port()) as proxy:
        provider = OidcProvider(
            root, clients=[client], accounts={"alice": ALICE}, issuer=proxy.base_url
        )
        with provider:
            proxy.upstream = f"http://127.0.0.1:{provider.port}"
            server.env["OIDC_ISSUER"] = provider.issuer
            server.start()
            try:
                yield Sso(server, provider, proxy)
            finally:
                server.stop()


@pytest.fixture
def pages(browser: Browser) -> Iterator[list[Page]]:
    """Fresh contexts (no provider session from an earlier test), watched for errors."""
    opened: list[Page] = []
    watch = ConsoleWatch()
    yield opened
    for page in opened:
        page.context.close()
    assert not watch.unexpected(), watch.unexpected()


def _open(browser: Browser, server: LiveServer, pages: list[Page]) -> Page:
    context = browser.new_context()
    context.add_init_script(CSP_WATCH)
    page = context.new_page()
    pages.append(page)
    page.goto(server.url + "/")
    return page


def _sign_in_at_provider(page: Page, account: str) -> None:
    page.get_by_test_id("login-sso").click()
    page.get_by_label("Login").fill(account)
    page.get_by_role("button", name="Sign in").click()


def _me(server: LiveServer, page: Page) -> dict[str, Any]:
    expect(page.locator("#app")).to_be_visible()
    token = page.evaluate("localStorage.getItem('pda.token')")
    assert "sso_token" not in page.url  # the fragment was cleared
    with server.client(token) as http:
        return dict(http.get("/api/users/me").json())


def test_a_first_sign_in_makes_the_user_with_the_providers_groups(
    sso: Sso, browser: Browser, pages: list[Page]
) -> None:
    server = sso.server
    page = _open(browser, server, pages)
    expect(page.get_by_test_id("login-sso")).to_have_text("Sign in with Test IdP")
    _sign_in_at_provider(page, "alice")
    me = _me(server, page)
    # No preferred_username in this provider's tokens: the name is the email.
    assert (me["username"], me["email"], me["display_name"]) == (
        "alice@example.org",
        "alice@example.org",
        "Alice Analyst",
    )
    assert sorted((g["name"], g["origin"]) for g in me["groups"]) == [
        ("analysts", "claim"),
        ("ops", "claim"),
    ]
    # Only the local admin may still use a password here.
    with httpx.Client(base_url=server.url) as http:
        alice = {"username": "alice@example.org", "password": "x" * 8}
        refused = http.post("/api/auth/login", json=alice)
        assert (refused.status_code, refused.json()["code"]) == (403, "password_sign_in_off")
        admin = http.post("/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD})
        assert admin.status_code == 200, admin.text


def test_groups_follow_the_provider_at_each_sign_in(
    sso: Sso, browser: Browser, pages: list[Page]
) -> None:
    server, provider = sso.server, sso.provider
    provider.set_account("bob", {"name": "Bob", "email": "bob@example.org", "groups": ["ops"]})
    page = _open(browser, server, pages)
    _sign_in_at_provider(page, "bob")
    first = _me(server, page)
    assert [g["name"] for g in first["groups"]] == ["ops"]

    provider.set_account("bob", {"name": "Bob B.", "email": "bob@example.org", "groups": ["data"]})
    again = _open(browser, server, pages)
    _sign_in_at_provider(again, "bob")
    second = _me(server, again)
    assert second["id"] == first["id"]  # the same user: matched by issuer and subject
    assert second["display_name"] == "Bob B."
    assert [(g["name"], g["origin"]) for g in second["groups"]] == [("data", "claim")]
    with server.client() as admin:
        groups = {g["name"]: g for g in admin.get("/api/groups").json()}
    assert [m["username"] for m in groups["data"]["members"]] == ["bob@example.org"]
    assert "bob@example.org" not in [m["username"] for m in groups["ops"]["members"]]  # left


def test_a_forged_state_is_refused_with_its_reason(
    sso: Sso, browser: Browser, pages: list[Page]
) -> None:
    server, provider = sso.server, sso.provider
    provider.set_account("carol", {"name": "Carol", "groups": []})
    page = _open(browser, server, pages)

    def forge(route: Route) -> None:
        # Our redirect to the provider, with another state than the one in our cookie: the
        # provider will send that state back, as a forged response would.
        response = route.fetch(max_redirects=0)
        location = urlsplit(response.headers["location"])
        query = {key: values[0] for key, values in parse_qs(location.query).items()}
        query["state"] = "a-state-this-browser-never-started"
        forged = location._replace(query=urlencode(query)).geturl()
        route.fulfill(response=response, headers={**response.headers, "location": forged})

    page.route("**/api/auth/oidc/login", forge)
    _sign_in_at_provider(page, "carol")
    expect(page.locator("#login-error")).to_contain_text(
        "The sign-in's state does not match the one this browser started with"
    )
    assert page.evaluate("localStorage.getItem('pda.token')") is None
    with server.client() as admin:
        assert not any("carol" in u["username"] for u in admin.get("/api/users").json())


def test_a_sign_in_cancelled_at_the_provider_says_so(
    sso: Sso, browser: Browser, pages: list[Page]
) -> None:
    server = sso.server
    page = _open(browser, server, pages)
    page.get_by_test_id("login-sso").click()
    page.get_by_role("button", name="Cancel").click()
    expect(page.locator("#login-error")).to_contain_text(
        "The identity provider did not sign you in"
    )
    expect(page.get_by_test_id("login-username")).to_be_visible()


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("altered", "signature does not match the identity provider's keys"),
        ("expired", "ID token has expired"),
        ("another nonce", "nonce does not match this sign-in's"),
        ("another issuer", "came from an unknown issuer"),
    ],
)
def test_an_id_token_that_is_not_this_sign_ins_is_refused(
    sso: Sso, browser: Browser, pages: list[Page], case: str, message: str
) -> None:
    keys = sso.provider.root / "keys.json"
    tampers: dict[str, Tamper] = {
        "altered": altered,
        "expired": expired(keys),
        "another nonce": changed(keys, nonce="the-nonce-of-another-sign-in"),
        "another issuer": changed(keys, iss="http://127.0.0.1:9"),
    }
    sso.provider.set_account("dave", {"name": "Dave", "groups": ["analysts"]})
    sso.proxy.tamper = tampers[case]
    try:
        page = _open(browser, sso.server, pages)
        _sign_in_at_provider(page, "dave")
        expect(page.locator("#login-error")).to_contain_text(message)
    finally:
        sso.proxy.tamper = None
    assert page.evaluate("localStorage.getItem('pda.token')") is None
    with sso.server.client() as admin:
        assert not any("dave" in u["username"] for u in admin.get("/api/users").json())
