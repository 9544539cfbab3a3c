"""Accounts over the real API: admins list, create, disable, limit, reset and delete
users; everyone changes their own password and signs out for real. Each admin action
is also tried by an ordinary user, and each ended credential is tried again.

Requests and whole answers only, so the app runs in this process (tests/support/app_client.py)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD, scripted_app
from tests.support.app_client import InProcessServer

REPLIES = [{"when": "hello", "content": "Hello there.", "repeat": True}]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    with scripted_app(tmp_path_factory.mktemp("accounts"), REPLIES) as live:
        yield live


@pytest.fixture(scope="module")
def admin(server: InProcessServer) -> Iterator[httpx.Client]:
    with server.client() as http:
        yield http


class Person:
    """A user the admin made, with a password and a way to sign in."""

    def __init__(self, server: InProcessServer, admin: httpx.Client) -> None:
        self.server = server
        self.name = f"user-{secrets.token_hex(4)}"
        self.password = secrets.token_urlsafe(12)
        created = admin.post("/api/users", json={"username": self.name, "password": self.password})
        assert created.status_code == 201, created.text
        self.id: int = created.json()["id"]

    def login(self, password: str | None = None) -> httpx.Response:
        return self.server.request(
            "POST",
            "/api/auth/login",
            json={"username": self.name, "password": password or self.password},
        )

    def token(self) -> str:
        response = self.login()
        assert response.status_code == 200, response.text
        return str(response.json()["access_token"])

    def client(self, token: str | None = None) -> httpx.Client:
        return self.server.client(token or self.token())


@pytest.fixture
def person(server: InProcessServer, admin: httpx.Client) -> Person:
    return Person(server, admin)


def me(server: InProcessServer, credential: str) -> httpx.Response:
    return server.request("GET", "/api/users/me", headers={"Authorization": f"Bearer {credential}"})


def admin_id(admin: httpx.Client) -> int:
    return int(admin.get("/api/users/me").json()["id"])


def test_the_admin_lists_and_creates_users_with_no_hash_on_the_wire(
    admin: httpx.Client, person: Person
) -> None:
    users = admin.get("/api/users")
    assert users.status_code == 200
    by_name = {user["username"]: user for user in users.json()}
    assert by_name["admin"]["is_admin"] and not by_name["admin"]["disabled"]
    created = by_name[person.name]
    assert created["id"] == person.id and not created["is_admin"]
    none = {
        "max_sandboxes": None,
        "max_runs": None,
        "max_disk_mb": None,
        "max_tokens_per_day": None,
        "max_sandbox_seconds_per_day": None,
    }
    assert created["limits"] == none
    assert set(created) == {
        *("id", "username", "is_admin", "disabled", "created_at", "limits"),
        *("email", "display_name", "groups"),  # single sign-on's, and the user's groups
    }
    assert "$2b$" not in users.text
    again = admin.post("/api/users", json={"username": person.name, "password": "x" * 8})
    assert again.status_code == 409


def test_an_ordinary_user_is_refused_every_admin_route(
    admin: httpx.Client, person: Person, server: InProcessServer
) -> None:
    other = Person(server, admin)
    attempts: dict[str, tuple[str, str, dict[str, Any] | None]] = {
        "list": ("GET", "/api/users", None),
        "create": ("POST", "/api/users", {"username": "mallory", "password": "x" * 12}),
        "disable": ("PATCH", f"/api/users/{other.id}", {"disabled": True}),
        "limits": ("PATCH", f"/api/users/{person.id}", {"limits": {"max_runs": 99}}),
        "reset": ("PUT", f"/api/users/{other.id}/password", {"password": "y" * 12}),
        "delete": ("DELETE", f"/api/users/{other.id}", None),
    }
    with person.client() as http:
        statuses = {
            name: http.request(method, path, json=body).status_code
            for name, (method, path, body) in attempts.items()
        }
        assert http.get("/api/users/me").json()["username"] == person.name
    assert statuses == dict.fromkeys(attempts, 403)
    # Nothing happened: the other user still signs in, nobody named mallory exists.
    assert other.login().status_code == 200
    users = {user["username"]: user for user in admin.get("/api/users").json()}
    assert "mallory" not in users
    assert users[person.name]["limits"]["max_runs"] is None


def test_a_disabled_user_is_refused_at_once_and_enabled_again(
    admin: httpx.Client, person: Person, server: InProcessServer
) -> None:
    token = person.token()
    with person.client(token) as http:
        key = http.post("/api/keys", json={"name": "script"}).json()["key"]
    assert me(server, token).status_code == 200 and me(server, key).status_code == 200

    disabled = admin.patch(f"/api/users/{person.id}", json={"disabled": True})
    assert disabled.status_code == 200 and disabled.json()["disabled"]
    for credential in (token, key):
        refused = me(server, credential)
        assert refused.status_code == 401 and refused.json()["code"] == "account_disabled"
    chat = server.request(
        "POST",
        "/v1/chat/completions",
        headers={"Authorization": f"Bearer {key}"},
        json={"model": "scripted", "messages": [{"role": "user", "content": "hello"}]},
    )
    assert chat.status_code == 401 and chat.json()["error"]["code"] == "account_disabled"
    login = person.login()
    assert login.status_code == 401 and "disabled" in login.json()["detail"]
    wrong = person.login("not-the-password")
    assert wrong.status_code == 401 and "disabled" not in wrong.text  # no hint without it

    enabled = admin.patch(f"/api/users/{person.id}", json={"disabled": False})
    assert enabled.status_code == 200 and not enabled.json()["disabled"]
    assert me(server, token).status_code == 200 and me(server, key).status_code == 200
    assert person.login().status_code == 200


def test_an_admin_cannot_disable_or_delete_themselves(admin: httpx.Client) -> None:
    own = admin_id(admin)
    disable = admin.patch(f"/api/users/{own}", json={"disabled": True})
    delete = admin.delete(f"/api/users/{own}")
    assert (disable.status_code, delete.status_code) == (409, 409)
    assert "your own account" in disable.json()["detail"]
    assert admin.get("/api/users/me").status_code == 200
    # Setting their own limits is fine.
    limits = admin.patch(f"/api/users/{own}", json={"limits": {"max_runs": 5}})
    assert limits.status_code == 200
    assert admin.patch(f"/api/users/{own}", json={"limits": {}}).status_code == 200


def test_the_admin_sets_and_clears_a_users_limits(admin: httpx.Client, person: Person) -> None:
    limits = {
        "max_sandboxes": 2,
        "max_runs": 1,
        "max_disk_mb": 512,
        "max_tokens_per_day": 10_000,
        "max_sandbox_seconds_per_day": 0,
    }
    updated = admin.patch(f"/api/users/{person.id}", json={"limits": limits})
    assert updated.status_code == 200 and updated.json()["limits"] == limits
    with person.client() as http:
        assert http.get("/api/users/me").json()["limits"] == limits
    # Disabling leaves the limits as they are; limits given again replace them all.
    admin.patch(f"/api/users/{person.id}", json={"disabled": True})
    admin.patch(f"/api/users/{person.id}", json={"disabled": False})
    cleared = admin.patch(f"/api/users/{person.id}", json={"limits": {"max_runs": 3}})
    expected = {
        "max_sandboxes": None,
        "max_runs": 3,
        "max_disk_mb": None,
        "max_tokens_per_day": None,
        "max_sandbox_seconds_per_day": None,
    }
    assert cleared.json()["limits"] == expected
    listed = {u["id"]: u for u in admin.get("/api/users").json()}
    assert listed[person.id]["limits"] == expected

    for bad in (
        {"limits": {"max_runs": 0}},
        {"limits": {"max_runs": -1}},
        {"limits": {"max_runs": "many"}},
        {"limits": {"max_memory": 5}},
        {"limits": {"max_tokens_per_day": -1}},
        {"limits": {"max_sandbox_seconds_per_day": "all"}},
        {"max_runs": 3},
    ):
        refused = admin.patch(f"/api/users/{person.id}", json=bad)
        assert refused.status_code == 422, (bad, refused.text)
    assert {u["id"]: u for u in admin.get("/api/users").json()}[person.id]["limits"] == expected


def test_unknown_users_are_404_and_odd_ids_never_500(admin: httpx.Client) -> None:
    for method, body, path in (
        ("PATCH", {"disabled": True}, ""),
        ("PUT", {"password": "z" * 12}, "/password"),
        ("DELETE", None, ""),
    ):
        missing = admin.request(method, f"/api/users/987654{path}", json=body)
        assert missing.status_code == 404 and missing.json()["code"] == "user_not_found"
        for odd in ("99999999999999999999999", "0", "-1", "abc"):
            response = admin.request(method, f"/api/users/{odd}{path}", json=body)
            assert response.status_code == 422, (odd, response.text)


def test_a_password_reset_ends_the_users_tokens(
    admin: httpx.Client, person: Person, server: InProcessServer
) -> None:
    token = person.token()
    reset = admin.put(f"/api/users/{person.id}/password", json={"password": "a-new-password"})
    assert reset.status_code == 204
    assert me(server, token).status_code == 401
    assert person.login().status_code == 401
    assert person.login("a-new-password").status_code == 200
    short = admin.put(f"/api/users/{person.id}/password", json={"password": "short"})
    assert short.status_code == 422


def test_a_deleted_user_is_gone_with_their_sessions(
    admin: httpx.Client, person: Person, server: InProcessServer
) -> None:
    token = person.token()
    with person.client(token) as http:
        key = http.post("/api/keys", json={"name": "script"}).json()["key"]
        chat = http.post(
            "/v1/chat/completions",
            json={"model": "scripted", "messages": [{"role": "user", "content": "hello"}]},
        )
        assert chat.status_code == 200, chat.text
        assert len(http.get("/api/conversations").json()) == 1
        uploaded = http.post(
            "/api/upload", data={"session_id": "mine"}, files={"file": ("a.csv", b"a\n1\n")}
        )
        assert uploaded.status_code == 201, uploaded.text
    workspace = server.data_dir / "scratch" / f"u{person.id}-mine"
    assert workspace.is_dir()
    # What a user keeps across sessions: a TDD solution, their passage index.
    cache = server.data_dir / "tdd_cache" / f"u{person.id}"
    cache.mkdir(parents=True)
    (cache / "solved.json").write_text("{}")
    index = server.data_dir / "rag" / f"user_{person.id}.sqlite3"
    index.parent.mkdir(exist_ok=True)
    index.write_bytes(b"")

    deleted = admin.delete(f"/api/users/{person.id}")
    assert deleted.status_code == 204
    assert not workspace.exists() and not cache.exists() and not index.exists()
    assert me(server, token).status_code == 401
    assert me(server, key).status_code == 401
    assert person.login().status_code == 401
    assert person.name not in [u["username"] for u in admin.get("/api/users").json()]
    assert admin.delete(f"/api/users/{person.id}").status_code == 404

    # The same name made again is a new, empty account that the old token does not open.
    again = admin.post("/api/users", json={"username": person.name, "password": person.password})
    assert again.status_code == 201 and again.json()["id"] != person.id
    assert me(server, token).status_code == 401
    with server.client(person.token()) as http:
        assert http.get("/api/conversations").json() == []
        assert http.get("/api/keys").json() == []


def test_users_change_their_own_password_and_their_other_tokens_end(
    person: Person, server: InProcessServer
) -> None:
    elsewhere = person.token()  # signed in on another device
    here = person.token()
    with person.client(here) as http:
        wrong = http.post(
            "/api/auth/password",
            json={"current_password": "not-it", "new_password": "a-new-password"},
        )
        assert wrong.status_code == 400 and wrong.json()["code"] == "wrong_password"
        assert me(server, here).status_code == 200  # nothing changed

        short = http.post(
            "/api/auth/password", json={"current_password": person.password, "new_password": "x"}
        )
        assert short.status_code == 422
        changed = http.post(
            "/api/auth/password",
            json={"current_password": person.password, "new_password": "a-new-password"},
        )
    assert changed.status_code == 200, changed.text
    assert changed.headers["set-cookie"].startswith("pda_token=")
    fresh = changed.json()["access_token"]
    assert me(server, fresh).status_code == 200
    assert me(server, elsewhere).status_code == 401
    assert me(server, here).status_code == 401
    assert person.login().status_code == 401
    assert person.login("a-new-password").status_code == 200


def test_signing_out_ends_the_bearer_token(person: Person, server: InProcessServer) -> None:
    token, other = person.token(), person.token()
    out = server.request("POST", "/api/auth/logout", headers={"Authorization": f"Bearer {token}"})
    assert out.status_code == 204
    refused = me(server, token)
    assert refused.status_code == 401 and refused.json()["code"] == "invalid_api_key"
    assert me(server, other).status_code == 200  # only the token that signed out
    # Signing out again, or with nothing, or with rubbish, is still a clean 204.
    for headers in ({"Authorization": f"Bearer {token}"}, {}, {"Authorization": "Bearer junk"}):
        assert server.request("POST", "/api/auth/logout", headers=headers).status_code == 204


def test_signing_out_with_the_cookie_ends_that_token(
    person: Person, server: InProcessServer
) -> None:
    with server.http() as browser:  # keeps the cookie, sends no header
        login = browser.post(
            "/api/auth/login", json={"username": person.name, "password": person.password}
        )
        token = login.json()["access_token"]
        assert browser.cookies["pda_token"] == token
        assert me(server, token).status_code == 200
        assert browser.post("/api/auth/logout").status_code == 204
    assert me(server, token).status_code == 401


def test_the_admin_signs_out_and_in_again(server: InProcessServer) -> None:
    token = server.token()
    assert (
        server.request(
            "POST", "/api/auth/logout", headers={"Authorization": f"Bearer {token}"}
        ).status_code
        == 204
    )
    assert me(server, token).status_code == 401
    assert me(server, server.token("admin", ADMIN_PASSWORD)).status_code == 200
