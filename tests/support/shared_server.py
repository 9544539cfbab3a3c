"""One live server for a module's tests, and a user of its own for each test.

A server takes seconds to start, so a module's tests that need nothing but a server
share one (a module-scoped fixture built on `module_server`). What one test leaves on
it (conversations, run slots, sandboxes) must not reach the next: each test signs up a
user of its own (`own_user`) and talks to the server as that user.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD
from tests.support.live_server import LiveServer

PASSWORD = "a-password-of-its-own"
_users = itertools.count(1)


class SharedServer(LiveServer):
    """A live server that signs its admin in once (bcrypt costs each login a second on a
    busy machine)."""

    @functools.cached_property
    def admin_token(self) -> str:
        return self.token()


@contextlib.contextmanager
def module_server(root: Path, **env: str) -> Iterator[SharedServer]:
    """A live server in `root`, with `start_server`'s defaults; keyword arguments become
    its environment."""
    env.setdefault("ADMIN_PASSWORD", ADMIN_PASSWORD)
    env.setdefault("LLM_BACKEND", "scripted")
    env.setdefault("MODEL_PROBE", "false")  # a stand-in upstream answers only its test's questions
    server = SharedServer(root / "data", **env)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class SignedIn:
    """A user of a shared server: what tests use of a `LiveServer` (`url`, `token()`,
    `client()`), signed in as that user."""

    def __init__(self, server: LiveServer, username: str) -> None:
        self.server = server
        self.username = username
        self._token = server.token(username, PASSWORD)

    @property
    def url(self) -> str:
        return self.server.url

    def token(self) -> str:
        return self._token

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        return self.server.client(token or self._token, **kwargs)


def sign_up(server: SharedServer, username: str) -> SignedIn:
    """A new user of `server` (made by its admin), signed in."""
    with server.client(server.admin_token) as admin:
        made = admin.post("/api/users", json={"username": username, "password": PASSWORD})
    assert made.status_code == 201, made.text
    return SignedIn(server, username)


def own_user(server: SharedServer, request: pytest.FixtureRequest) -> SignedIn:
    """A new user for the test that `request` is for, named after it."""
    name = re.sub(r"[^A-Za-z0-9_.@-]+", "-", request.node.name)[:100]
    return sign_up(server, f"{name}-{next(_users)}")
