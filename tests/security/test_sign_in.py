"""Login throttling as an attacker meets it: their failures slow only them.

Each test has a server of its own (LOGIN_FREE_ATTEMPTS=2). Clients bind addresses of
127.0.0.0/8 (all loopback), so the attacker and the owner come from different places.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD, StartServer, write_replies
from tests.support.live_server import ROOT, LiveServer, free_port
from tests.support.waiting import wait_for

FREE = 2
ATTACKER, OWNER = "127.0.0.3", "127.0.0.2"

FrontendFor = Callable[[int], str]  # the API's port in, run_frontend.py's URL out


@pytest.fixture(autouse=True)
def server_stays_healthy() -> None:
    """These tests start servers of their own, not the red-team suite's shared one."""


@pytest.fixture
def server(start_server: StartServer, tmp_path: Path) -> LiveServer:
    """A fresh server that trusts no proxy: two failures are free, then a long wait."""
    return start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "replies.json", []),
        LOGIN_FREE_ATTEMPTS=str(FREE),
        LOGIN_BACKOFF_SECONDS="600",
        TRUSTED_PROXIES="",
        FORWARDED_ALLOW_IPS="*",  # uvicorn's own variable must not bring trust back
    )


def from_address(url: str, address: str) -> httpx.Client:
    return httpx.Client(
        base_url=url, transport=httpx.HTTPTransport(local_address=address), timeout=30
    )


def login(http: httpx.Client, username: str, password: str, **headers: str) -> httpx.Response:
    return http.post(
        "/api/auth/login", json={"username": username, "password": password}, headers=headers
    )


def fail_until_throttled(http: httpx.Client, username: str = "admin", **headers: str) -> None:
    codes = [login(http, username, "wrong", **headers).status_code for _ in range(FREE + 2)]
    assert codes == [401] * (FREE + 1) + [429], codes


def test_an_attackers_failures_never_lock_the_owner_out(server: LiveServer) -> None:
    with from_address(server.url, ATTACKER) as attacker, from_address(server.url, OWNER) as owner:
        fail_until_throttled(attacker)
        # Throttled even with the right password, and for any other name from there.
        assert login(attacker, "admin", ADMIN_PASSWORD).status_code == 429
        assert login(attacker, "someone-else", "wrong").status_code == 429
        # The owner, from their own address, signs in at once.
        answer = login(owner, "admin", ADMIN_PASSWORD)
        assert answer.status_code == 200, answer.text
        assert answer.json()["access_token"]


def test_a_forged_x_forwarded_for_changes_nothing(server: LiveServer) -> None:
    # From 127.0.0.1, which uvicorn trusts by default, naming a fresh address each time,
    # and then the owner's.
    with httpx.Client(base_url=server.url, timeout=30) as attacker:
        codes = [
            login(attacker, f"user{i}", "wrong", **{"X-Forwarded-For": f"10.1.2.{i}"}).status_code
            for i in range(FREE + 2)
        ]
        assert codes == [401] * (FREE + 1) + [429], "each forged address got fresh tries"
        # Naming the owner's address neither frees the attacker nor locks the owner.
        forged = {"X-Forwarded-For": OWNER}
        for _ in range(FREE + 1):
            assert login(attacker, "admin", "wrong", **forged).status_code == 429
    with from_address(server.url, OWNER) as owner:
        assert login(owner, "admin", ADMIN_PASSWORD).status_code == 200


@pytest.fixture
def frontend_for() -> Iterator[FrontendFor]:
    processes: list[subprocess.Popen[bytes]] = []

    def start(api_port: int) -> str:
        port = free_port()
        env = {**os.environ, "FRONTEND_PORT": str(port), "PORT": str(api_port)}
        process = subprocess.Popen(
            [sys.executable, "run_frontend.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL
        )
        processes.append(process)
        url = f"http://127.0.0.1:{port}"

        def up() -> bool:
            assert process.poll() is None, "run_frontend.py exited"
            try:
                return httpx.get(url + "/health").status_code == 200
            except httpx.ConnectError:
                return False

        wait_for(up)
        return url

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


def test_run_frontend_forwards_the_real_client_address(
    start_server: StartServer, frontend_for: FrontendFor, tmp_path: Path
) -> None:
    server = start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "replies.json", []),
        LOGIN_FREE_ATTEMPTS=str(FREE),
        LOGIN_BACKOFF_SECONDS="600",
        TRUSTED_PROXIES="127.0.0.1",
    )
    url = frontend_for(server.port)
    with from_address(url, ATTACKER) as attacker, from_address(url, OWNER) as owner:
        # The attacker names the owner's address: the proxy replaces it with the real one.
        fail_until_throttled(attacker, "admin", **{"X-Forwarded-For": OWNER})
        assert login(owner, "admin", ADMIN_PASSWORD).status_code == 200
        # Through the proxy the attacker's own address is still the one throttled.
        assert login(attacker, "admin", ADMIN_PASSWORD).status_code == 429


def test_guessing_the_current_password_of_a_stolen_token_is_throttled(server: LiveServer) -> None:
    """A stolen token must not turn /api/auth/password into an unthrottled password oracle."""
    token = server.token()
    headers = {"Authorization": f"Bearer {token}"}
    with from_address(server.url, ATTACKER) as thief, from_address(server.url, OWNER) as owner:
        codes = [
            thief.post(
                "/api/auth/password",
                json={"current_password": f"guess-{i}", "new_password": "x" * 12},
                headers=headers,
            ).status_code
            for i in range(FREE + 2)
        ]
        assert codes == [400] * (FREE + 1) + [429], codes
        right = {"current_password": ADMIN_PASSWORD, "new_password": "y" * 12}
        assert thief.post("/api/auth/password", json=right, headers=headers).status_code == 429
        # The owner, from their own address, still signs in.
        assert login(owner, "admin", ADMIN_PASSWORD).status_code == 200
