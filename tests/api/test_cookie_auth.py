"""The login cookie: HttpOnly and SameSite=Strict, and good only for reading session files.

Requests and whole answers only, so the app runs in this process (tests/support/app_client.py)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ADMIN_PASSWORD, StartApp, write_replies
from tests.support.agent_script import SALES, upload


def test_the_cookie_reads_session_files_and_nothing_else(
    start_app: StartApp, tmp_path: Path
) -> None:
    server = start_app(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []))
    upload(server, "cookie")
    with server.http() as browser:  # keeps cookies, sends no header
        login = browser.post(
            "/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
        )
        set_cookie = login.headers["set-cookie"]
        assert set_cookie.startswith("pda_token=")
        assert "HttpOnly" in set_cookie and "SameSite=strict" in set_cookie
        assert "Path=/api" in set_cookie

        download = browser.get("/api/sessions/cookie/files/uploads/sales.csv")
        listing = browser.get("/api/sessions/cookie/files")
        refused = {
            "conversations": browser.get("/api/conversations"),
            "me": browser.get("/api/users/me"),
            "runs": browser.post("/api/runs", json={"message": "hi"}),
            "upload": browser.post(
                "/api/upload", data={"session_id": "cookie"}, files={"file": ("b.csv", SALES)}
            ),
            "chat": browser.post("/v1/chat/completions", json={"model": "x", "messages": []}),
        }

        logout = browser.post("/api/auth/logout")
        after = browser.get("/api/sessions/cookie/files/uploads/sales.csv")

    assert download.status_code == 200 and download.content == SALES
    assert "uploads/sales.csv" in [f["path"] for f in listing.json()]
    assert {name: r.status_code for name, r in refused.items()} == dict.fromkeys(refused, 401)
    assert logout.status_code == 204 and 'pda_token=""' in logout.headers["set-cookie"]
    assert after.status_code == 401


def test_a_forged_cookie_is_refused(start_app: StartApp, tmp_path: Path) -> None:
    server = start_app(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []))
    upload(server, "forged")
    response = server.request(
        "GET",
        "/api/sessions/forged/files/uploads/sales.csv",
        cookies={"pda_token": "not-a-token"},
    )
    assert response.status_code == 401
