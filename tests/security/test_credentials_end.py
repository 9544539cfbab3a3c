"""Credentials end together, tried on a live server: an admin's password reset, a user's
own password change (by default) and "sign out everywhere" end every access token and
every personal API key of that user at once, and nothing of anyone else's."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import httpx
import pytest

from tests.support.live_server import LiveServer


@dataclass
class Account:
    """A user the admin made, with the ways they sign in."""

    server: LiveServer
    name: str
    password: str
    id: int

    @classmethod
    def new(cls, server: LiveServer) -> Account:
        name, password = f"cred-{secrets.token_hex(4)}", secrets.token_urlsafe(12)
        with server.client() as admin:
            made = admin.post("/api/users", json={"username": name, "password": password})
        assert made.status_code == 201, made.text
        return cls(server, name, password, int(made.json()["id"]))

    def token(self) -> str:
        return self.server.token(self.name, self.password)

    def key(self, name: str = "script") -> str:
        with self.server.client(self.token()) as http:
            created = http.post("/api/keys", json={"name": name})
        assert created.status_code == 201, created.text
        return str(created.json()["key"])


def works(server: LiveServer, credential: str) -> bool:
    """Whether `credential` opens the API and the OpenAI-compatible routes: 200 from both,
    or 401 from both (anything else fails the test)."""
    headers = {"Authorization": f"Bearer {credential}"}
    me = httpx.get(f"{server.url}/api/users/me", headers=headers)
    models = httpx.get(f"{server.url}/v1/models", headers=headers)
    assert {me.status_code, models.status_code} <= {200, 401}, (me.text, models.text)
    assert me.status_code == models.status_code
    return me.status_code == 200


@pytest.fixture
def alice(server: LiveServer) -> Account:
    return Account.new(server)


@pytest.fixture
def bob(server: LiveServer) -> Account:
    """Another user, whose credentials must survive whatever happens to alice's."""
    return Account.new(server)


def test_an_admins_password_reset_ends_every_token_and_key(
    server: LiveServer, alice: Account, bob: Account
) -> None:
    tokens, keys = [alice.token(), alice.token()], [alice.key("one"), alice.key("two")]
    bobs = [bob.token(), bob.key()]
    assert all(works(server, credential) for credential in tokens + keys + bobs)

    with server.client() as admin:
        reset = admin.put(f"/api/users/{alice.id}/password", json={"password": "reset-by-admin"})
    assert reset.status_code == 204, reset.text

    assert not any(works(server, credential) for credential in tokens + keys)
    assert all(works(server, credential) for credential in bobs)
    fresh = server.token(alice.name, "reset-by-admin")
    with server.client(fresh) as http:
        assert http.get("/api/keys").json() == []  # revoked, not merely refused
        new_key = http.post("/api/keys", json={"name": "after"}).json()["key"]
    assert works(server, fresh) and works(server, new_key)


def test_a_users_own_password_change_ends_their_keys_unless_told_not_to(
    server: LiveServer, alice: Account, bob: Account
) -> None:
    kept_key, elsewhere, here = alice.key("kept"), alice.token(), alice.token()
    bobs = [bob.token(), bob.key()]

    # Told to keep them: the keys go on working; other sessions end as ever.
    with server.client(here) as http:
        changed = http.post(
            "/api/auth/password",
            json={
                "current_password": alice.password,
                "new_password": "second-password",
                "sign_out_everywhere": False,
            },
        )
    assert changed.status_code == 200, changed.text
    here = changed.json()["access_token"]
    assert works(server, kept_key) and works(server, here)
    assert not works(server, elsewhere)

    # By default: every other token and every key ends; this session goes on.
    elsewhere = server.token(alice.name, "second-password")
    with server.client(here) as http:
        changed = http.post(
            "/api/auth/password",
            json={"current_password": "second-password", "new_password": "third-password"},
        )
    assert changed.status_code == 200, changed.text
    assert changed.headers["set-cookie"].startswith("pda_token=")
    fresh = changed.json()["access_token"]
    assert works(server, fresh)
    assert not any(works(server, credential) for credential in (kept_key, elsewhere, here))
    with server.client(fresh) as http:
        assert http.get("/api/keys").json() == []
    assert all(works(server, credential) for credential in bobs)


def test_sign_out_everywhere_ends_every_token_and_key_this_one_too(
    server: LiveServer, alice: Account, bob: Account
) -> None:
    here, elsewhere, key = alice.token(), alice.token(), alice.key()
    bobs = [bob.token(), bob.key()]
    with httpx.Client(base_url=server.url) as browser:  # keeps the login cookie
        login = browser.post(
            "/api/auth/login", json={"username": alice.name, "password": alice.password}
        )
        cookie = login.json()["access_token"]
        assert browser.cookies["pda_token"] == cookie

        out = browser.post(
            "/api/auth/logout-everywhere", headers={"Authorization": f"Bearer {here}"}
        )
        assert out.status_code == 204, out.text
        assert "pda_token" not in browser.cookies  # cleared

    assert not any(works(server, credential) for credential in (here, elsewhere, key, cookie))
    assert all(works(server, credential) for credential in bobs)
    again = alice.token()  # the password still signs in, afresh
    assert works(server, again)
    with server.client(again) as http:
        assert http.get("/api/keys").json() == []


def test_sign_out_everywhere_by_api_key_and_without_a_credential(
    server: LiveServer, alice: Account
) -> None:
    nobody = httpx.post(f"{server.url}/api/auth/logout-everywhere")
    assert nobody.status_code == 401
    assert nobody.json()["code"] == "invalid_api_key"

    key, token = alice.key(), alice.token()
    out = httpx.post(
        f"{server.url}/api/auth/logout-everywhere", headers={"Authorization": f"Bearer {key}"}
    )
    assert out.status_code == 204, out.text
    assert not works(server, key) and not works(server, token)
    again = httpx.post(
        f"{server.url}/api/auth/logout-everywhere", headers={"Authorization": f"Bearer {key}"}
    )
    assert again.status_code == 401  # the key that asked ended with the rest
