"""Personal API keys over the real API: shown once, kept only as a hash, usable by the
official openai SDK wherever a token works, owned by one user, and revocable.

Requests and whole answers only, so the app runs in this process (tests/support/app_client.py)."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from tests.conftest import scripted_app
from tests.support.app_client import InProcessServer

REPLIES = [{"when": "capital", "content": "Paris is the capital of France.", "repeat": True}]
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessServer]:
    with scripted_app(tmp_path_factory.mktemp("keys"), REPLIES) as live:
        yield live


def new_user(server: InProcessServer) -> httpx.Client:
    """A client signed in as a new ordinary user."""
    name, password = f"user-{secrets.token_hex(4)}", secrets.token_urlsafe(12)
    with server.client() as admin:
        created = admin.post("/api/users", json={"username": name, "password": password})
        assert created.status_code == 201
    return server.client(server.token(name, password))


@pytest.fixture
def user(server: InProcessServer) -> Iterator[httpx.Client]:
    with new_user(server) as http:
        yield http


def sdk(server: InProcessServer, key: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"{server.url}/v1", api_key=key, max_retries=0, http_client=server.http()
    )


def test_a_key_is_shown_once_and_works_with_the_openai_sdk(
    server: InProcessServer, user: httpx.Client
) -> None:
    created = user.post("/api/keys", json={"name": "notebook"})
    assert created.status_code == 201, created.text
    body = created.json()
    key = body["key"]
    assert key.startswith("pda-") and len(key) >= 4 + 43
    assert body["name"] == "notebook" and body["last_used_at"] is None

    listed = user.get("/api/keys")
    assert listed.status_code == 200
    (entry,) = listed.json()
    assert set(entry) == {"id", "name", "created_at", "last_used_at"}
    assert entry["id"] == body["id"] and key not in listed.text

    completion = sdk(server, key).chat.completions.create(model="scripted", messages=QUESTION)
    assert completion.choices[0].message.content == "Paris is the capital of France."
    assert user.get("/api/keys").json()[0]["last_used_at"] is not None

    # Everywhere a token works: the user's own routes, as that user.
    with server.client(key) as by_key:
        assert (
            by_key.get("/api/users/me").json()["username"]
            == user.get("/api/users/me").json()["username"]
        )
        assert len(by_key.get("/api/conversations").json()) == 1
        assert [k["name"] for k in by_key.get("/api/keys").json()] == ["notebook"]


def test_a_revoked_key_is_refused_at_once(server: InProcessServer, user: httpx.Client) -> None:
    kept = user.post("/api/keys", json={"name": "kept"}).json()
    revoked = user.post("/api/keys", json={"name": "revoked"}).json()
    client = sdk(server, revoked["key"])
    assert client.models.list().data

    assert user.delete(f"/api/keys/{revoked['id']}").status_code == 204
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="scripted", messages=QUESTION)
    refused = server.request(
        "GET", "/api/users/me", headers={"Authorization": f"Bearer {revoked['key']}"}
    )
    assert refused.status_code == 401
    assert [k["id"] for k in user.get("/api/keys").json()] == [kept["id"]]
    assert sdk(server, kept["key"]).models.list().data  # the other key still works
    assert user.delete(f"/api/keys/{revoked['id']}").status_code == 404


def test_another_users_key_is_404_and_unharmed(server: InProcessServer, user: httpx.Client) -> None:
    key = user.post("/api/keys", json={"name": "mine"}).json()
    with new_user(server) as other:
        assert other.get("/api/keys").json() == []
        refused = other.delete(f"/api/keys/{key['id']}")
        assert refused.status_code == 404 and refused.json()["code"] == "api_key_not_found"
        assert other.delete("/api/keys/99999999").status_code == 404
        assert other.delete("/api/keys/99999999999999999999999").status_code == 422
    assert [k["id"] for k in user.get("/api/keys").json()] == [key["id"]]
    assert sdk(server, key["key"]).models.list().data


def test_wrong_and_malformed_keys_are_401_in_openais_shape(server: InProcessServer) -> None:
    for key in ("pda-" + secrets.token_urlsafe(32), "pda-", "pda-" + "x" * 5000):
        with pytest.raises(openai.AuthenticationError):
            sdk(server, key).chat.completions.create(model="scripted", messages=QUESTION)


def test_key_names_are_checked(server: InProcessServer, user: httpx.Client) -> None:
    for body in ({"name": ""}, {"name": "x" * 101}, {}):
        assert user.post("/api/keys", json=body).status_code == 422
    assert user.get("/api/keys").json() == []
    assert server.request("POST", "/api/keys", json={"name": "anon"}).status_code == 401


def test_the_database_holds_no_key_in_plain(server: InProcessServer, user: httpx.Client) -> None:
    keys = [user.post("/api/keys", json={"name": f"k{i}"}).json()["key"] for i in range(3)]
    for key in keys:
        assert sdk(server, key).models.list().data
    files = list(Path(server.env["DATA_DIR"]).glob("app.db*"))
    assert files, "the SQLite database was not found"
    stored = b"".join(path.read_bytes() for path in files)
    for key in keys:
        # Where the key is kept, its hash is, so these are the bytes that hold the keys.
        assert hashlib.sha256(key.encode()).hexdigest().encode() in stored
        assert key.encode() not in stored
        assert key.removeprefix("pda-").encode() not in stored
