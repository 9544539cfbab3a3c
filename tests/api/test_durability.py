"""Nothing acknowledged is lost: restarts and `kill -9` keep conversations and credentials."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from backend.tools.sandbox import cgroups
from tests.conftest import write_replies
from tests.support.live_server import LiveServer


def scripted_server(tmp_path: Path, replies: list[object], **env: str) -> LiveServer:
    """A server on the scripted model, with its data in tmp_path/data."""
    path = write_replies(tmp_path / "replies.json", replies)
    return LiveServer(tmp_path / "data", LLM_BACKEND="scripted", SCRIPTED_REPLIES=path, **env)


def test_restart_keeps_conversations_and_the_generated_admin_password(tmp_path: Path) -> None:
    server = scripted_server(tmp_path, [{"content": "Stored.", "repeat": True}])
    server.start()
    try:
        printed = re.findall(r"ADMIN_PASSWORD=(\S+)", server.log())
        assert len(printed) == 1
        password = printed[0]
        with server.client(server.token("admin", password)) as http:
            http.post("/api/chat", json={"message": "remember me", "session_id": "keep"})
    finally:
        server.stop()

    server.start()
    try:
        assert len(re.findall(r"ADMIN_PASSWORD=", server.log())) == 1, "printed only once"
        with server.client(server.token("admin", password)) as http:
            conversations = http.get("/api/conversations").json()
        assert [c["session_id"] for c in conversations] == ["keep"]
        stored = [path for path in (tmp_path / "data").rglob("*") if path.is_file()]
        assert any(path.name == "app.db" for path in stored)
        # The database, its WAL, the key, the logs: only the file kept for the first
        # sign-in (mode 0600, tests/test_first_run.py) holds it.
        holding = [path.name for path in stored if password.encode() in path.read_bytes()]
        assert holding == ["initial_admin_password"]
    finally:
        server.stop()


def test_changing_admin_password_ends_old_sessions(tmp_path: Path) -> None:
    server = scripted_server(tmp_path, [], ADMIN_PASSWORD="old-pass-1")
    server.start()
    old_token = server.token()
    server.stop()
    server.env["ADMIN_PASSWORD"] = "new-pass-2"
    server.start()
    try:
        stale = httpx.get(
            f"{server.url}/api/users/me", headers={"Authorization": f"Bearer {old_token}"}
        )
        assert stale.status_code == 401
        fresh = httpx.get(
            f"{server.url}/api/users/me", headers={"Authorization": f"Bearer {server.token()}"}
        )
        assert fresh.json()["username"] == "admin"
    finally:
        server.stop()


def test_acknowledged_message_survives_kill_9(tmp_path: Path, database_url: str) -> None:
    replies = [{"content": "Durable.", "repeat": True}]
    server = scripted_server(
        tmp_path, replies, ADMIN_PASSWORD="pw-12345678", DATABASE_URL=database_url
    )
    server.start()
    with server.client() as http:
        response = http.post("/api/chat", json={"message": "do not lose this", "session_id": "k9"})
        assert response.status_code == 200
        conversation_id = response.json()["conversation_id"]
    server.kill9()

    server.start()
    try:
        with server.client() as http:
            messages = http.get(f"/api/conversations/{conversation_id}").json()["messages"]
        assert [(m["role"], m["content"]) for m in messages] == [
            ("user", "do not lose this"),
            ("assistant", "Durable."),
        ]
    finally:
        server.stop()


def _admin(server: LiveServer) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token()}"}


def test_health_reports_backend_model_and_sandbox(tmp_path: Path, database_url: str) -> None:
    server = scripted_server(tmp_path, [], ADMIN_PASSWORD="pw-12345678", DATABASE_URL=database_url)
    server.start()
    try:
        answer = httpx.get(f"{server.url}/health", headers=_admin(server))  # details: admins
    finally:
        server.stop()
    health = answer.json()
    assert health["status"] == "ok"
    kind = "sqlite" if database_url.startswith("sqlite") else "postgresql"
    assert health["database"]["kind"] == kind
    assert health["database"]["location"].endswith(database_url.rsplit("/", 1)[-1])
    password = database_url.split(":")[2].split("@")[0] if kind == "postgresql" else "x" * 9
    assert password not in answer.text
    assert health["executor"] == {"backend": "local"}
    assert health["llm"] == {
        "backend": "scripted",
        "model": "scripted",
        "reason": "set by LLM_BACKEND",
    }
    # `make test` installs bubblewrap, so the default SANDBOX=auto must isolate.
    assert health["sandbox"]["mode"] == "bwrap" and health["sandbox"]["isolated"] is True
    # This process has the server's privileges: where it can make a cgroup, so can the server,
    # and a run's memory is bounded by it; elsewhere /health says why DuckDB may not start.
    bound = "cgroup" if cgroups.writable() else "rlimit"
    assert health["sandbox"]["memory_bound"] == bound
    assert ("warning" in health["sandbox"]) == (bound == "rlimit")


def test_health_warns_when_the_sandbox_is_switched_off(tmp_path: Path) -> None:
    server = scripted_server(tmp_path, [], ADMIN_PASSWORD="pw-12345678", SANDBOX="none")
    server.start()
    try:
        sandbox = httpx.get(f"{server.url}/health", headers=_admin(server)).json()["sandbox"]
    finally:
        server.stop()
    assert sandbox["mode"] == "none" and sandbox["isolated"] is False
    assert "WITHOUT OS isolation" in sandbox["warning"]
    assert "WITHOUT OS isolation" in server.log()
