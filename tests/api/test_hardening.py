"""Login throttling, security headers and the API docs switch (issue 12).

Requests and whole answers only, so the app runs in this process (tests/support/app_client.py);
throttling by client address, with real sockets, is tests/security/test_sign_in.py's."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.conftest import ADMIN_PASSWORD, StartApp, write_replies
from tests.support.app_client import InProcessServer
from tests.support.waiting import wait_for


def login(server: InProcessServer, username: str, password: str) -> httpx.Response:
    return server.request(
        "POST", "/api/auth/login", json={"username": username, "password": password}
    )


def test_failed_logins_back_off_and_a_success_resets_them(
    start_app: StartApp, tmp_path: Path
) -> None:
    server = start_app(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []),
        LOGIN_FREE_ATTEMPTS="3",
        LOGIN_BACKOFF_SECONDS="1",
    )
    assert [login(server, "admin", "wrong").status_code for _ in range(3)] == [401] * 3
    throttled = login(server, "admin", "wrong")  # the 4th failure locks for 1 s
    assert throttled.status_code == 401
    locked = login(server, "admin", ADMIN_PASSWORD)  # even the right one must wait
    assert locked.status_code == 429, locked.text
    assert 1 <= int(locked.headers["Retry-After"]) <= 2
    assert "try again in" in locked.json()["detail"]
    # The address is throttled too: another name from it waits as well.
    assert login(server, "someone-else", "x").status_code == 429
    wait_for(lambda: login(server, "admin", ADMIN_PASSWORD).status_code == 200, timeout=30)
    # The success cleared the failures: three more are free again.
    assert [login(server, "admin", "wrong").status_code for _ in range(3)] == [401] * 3


def test_every_response_has_security_headers_and_html_a_csp(
    start_app: StartApp, tmp_path: Path
) -> None:
    server = start_app(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []))
    with server.client() as http:
        for path in ("/health", "/v1/models", "/api/conversations", "/api/nope", "/openapi.json"):
            response = http.get(path)
            assert response.headers["x-content-type-options"] == "nosniff", path
            assert response.headers["referrer-policy"] == "no-referrer", path
        page = http.get("/")
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert (
            "'unsafe-inline'"
            not in page.headers["content-security-policy"].split("script-src")[1].split(";")[0]
        )
        docs = http.get("/docs")
        assert docs.status_code == 200
        assert "frame-ancestors 'none'" in docs.headers["content-security-policy"]


def test_the_api_docs_can_be_turned_off(start_app: StartApp, tmp_path: Path) -> None:
    server = start_app(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []), API_DOCS="false")
    with server.client() as http:
        for path in ("/docs", "/redoc", "/openapi.json"):
            assert http.get(path).status_code == 404, path
        assert http.get("/health").status_code == 200
