"""Issue 39: a first run's console. The generated admin password is kept in a file only its
owner can read (the banner names it) until the password changes; requests are not logged
unless ACCESS_LOG says so; Ctrl-C after DuckDB answered a request prints no leak report."""

from __future__ import annotations

import re
import signal
import stat
from pathlib import Path

import httpx
import pytest

from tests.conftest import write_replies
from tests.support.agent_script import sse_events, upload
from tests.support.live_server import LiveServer

PASSWORD_FILE = "initial_admin_password"
# uvicorn's access line: `127.0.0.1:PORT - "GET /health HTTP/1.1" 200`
ACCESS_LINE = re.compile(r'"GET /health HTTP/1\.1" 200')


def _server(tmp_path: Path, name: str, **env: str) -> LiveServer:
    env.setdefault("ADMIN_PASSWORD", "")
    replies = write_replies(tmp_path / f"{name}.json", [])
    return LiveServer(tmp_path / name, LLM_BACKEND="scripted", SCRIPTED_REPLIES=replies, **env)


def _login(server: LiveServer, password: str) -> httpx.Response:
    body = {"username": "admin", "password": password}
    return httpx.post(f"{server.url}/api/auth/login", json=body, timeout=30)


def test_the_generated_password_is_kept_in_a_file_only_its_owner_reads(tmp_path: Path) -> None:
    server = _server(tmp_path, "first").start()
    try:
        kept = (tmp_path / "first" / PASSWORD_FILE).resolve()
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        text = kept.read_text()
        password = text.removesuffix("\n")
        assert text == password + "\n" and len(password) >= 16
        banner = server.log()
        assert f"ADMIN_PASSWORD={password}\n" in banner
        assert f"Also written to {kept}\n" in banner
        assert _login(server, password).status_code == 200

        # Changed, the kept password is no longer the admin's: its file goes.
        token = _login(server, password).json()["access_token"]
        changed = httpx.post(
            f"{server.url}/api/auth/password",
            json={"current_password": password, "new_password": "a-new-admin-password"},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert changed.status_code == 200, changed.text
        assert not kept.exists()
    finally:
        server.stop()


def test_adopting_admin_password_removes_the_kept_one(tmp_path: Path) -> None:
    server = _server(tmp_path, "adopt").start()
    kept = tmp_path / "adopt" / PASSWORD_FILE
    server.stop()
    assert kept.exists()
    server.env["ADMIN_PASSWORD"] = "admin-password-from-env"
    server.start()
    try:
        assert not kept.exists()
        assert _login(server, "admin-password-from-env").status_code == 200
    finally:
        server.stop()


def test_a_set_admin_password_is_not_written(tmp_path: Path) -> None:
    server = _server(tmp_path, "set", ADMIN_PASSWORD="admin-password-for-tests").start()
    try:
        assert not (tmp_path / "set" / PASSWORD_FILE).exists()
        assert "Also written to" not in server.log()
    finally:
        server.stop()


@pytest.mark.parametrize("access_log", ["", "true"])
def test_requests_are_logged_only_with_access_log(tmp_path: Path, access_log: str) -> None:
    env = {"ACCESS_LOG": access_log} if access_log else {}
    server = _server(tmp_path, "access", ADMIN_PASSWORD="admin-password-for-tests", **env)
    server.start()
    try:
        for _ in range(3):
            assert httpx.get(f"{server.url}/health").status_code == 200
    finally:
        server.stop()  # the log is complete once the process has ended
    logged = ACCESS_LINE.findall(server.log())
    assert len(logged) >= 3 if access_log else logged == []


SMALL_TABLE = "totals = df1.groupby('region', as_index=False)['price'].sum()\ntotals\n"


def test_ctrl_c_after_a_table_query_prints_no_leak_report(tmp_path: Path) -> None:
    replies = [
        {"when": ["[stage: react]", "Q-QUIET"], "content": "Action: coder\nAction Input: Q-QUIET"},
        {"when": ["[stage: generate]", "Q-QUIET"], "content": f"```python\n{SMALL_TABLE}```"},
        {"when": ["[stage: answer]", "Q-QUIET"], "content": "Here are the totals."},
    ]
    server = LiveServer(
        tmp_path / "quiet",
        LLM_BACKEND="scripted",
        SCRIPTED_REPLIES=write_replies(tmp_path / "quiet.json", replies),
        ADMIN_PASSWORD="admin-password-for-tests",
    ).start()
    try:
        upload(server, "quiet")
        body = {"message": "Q-QUIET totals by region", "session_id": "quiet", "stream": True,
                "agent_type": "react"}  # fmt: skip
        with server.client(timeout=300) as http:
            with http.stream("POST", "/api/chat", json=body) as reply:
                events = list(sse_events(reply.iter_lines()))
            table = next(data for name, data in events if name == "table")
            page = http.get(f"{table['url']}/rows", params={"sort": "price", "order": "desc"})
        assert page.status_code == 200, page.text
        assert page.json()["rows"] == [["south", 30], ["north", 10]]  # DuckDB answered it
        assert server.process is not None
        server.process.send_signal(signal.SIGINT)
        assert server.process.wait(timeout=60) == 0
    finally:
        server.stop()
    ended = server.log().split("--- start 1 ---", 1)[1]
    assert "Application shutdown complete." in ended
    assert "nanobind" not in ended and "leaked" not in ended
    assert "Traceback" not in ended and "KeyboardInterrupt" not in ended
