"""Helpers for the red-team suite: run hostile code through the live server, judge the outcome.

Hostile snippets print a marker from inside the sandbox: `BLOCKED:<exception type>` when the
attempt failed there, `ESCAPED:<data>` when it got through. Tests assert on those markers and,
wherever possible, on the host itself (files untouched, secrets absent, processes alive).
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.live_server import ROOT, LiveServer

__all__ = [
    "ROOT",
    "Secrets",
    "assert_healthy",
    "assert_no_secrets",
    "assert_x_kept",
    "client",
    "close_clients",
    "everything",
    "new_session",
    "run",
    "set_x",
    "stdout",
    "workspace",
]

SLACK = 15.0  # seconds a stopped run may take past its timeout (kill, reap, restart)

_clients: dict[str, httpx.Client] = {}


@dataclass(frozen=True)
class Secrets:
    """Values that live only on the host and must never reach sandboxed code."""

    secret_key: str
    admin_password: str
    openai_key: str
    canary: str
    token: str

    def values(self) -> dict[str, str]:
        return {
            "SECRET_KEY (DATA_DIR/secret_key)": self.secret_key,
            "ADMIN_PASSWORD": self.admin_password,
            "OPENAI_API_KEY": self.openai_key,
            "REDTEAM_CANARY env": self.canary,
            "the client's bearer token": self.token,
        }


def client(server: LiveServer) -> httpx.Client:
    """One logged-in client per server; no keep-alive, so a 500 cannot poison the next call."""
    existing = _clients.get(server.url)
    if existing is None:
        existing = server.client(limits=httpx.Limits(max_keepalive_connections=0))
        _clients[server.url] = existing
    return existing


def close_clients() -> None:
    while _clients:
        _clients.popitem()[1].close()


def new_session(tag: str) -> str:
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", tag).strip("-.")[:80] or "case"
    return f"rt-{clean}-{uuid.uuid4().hex[:8]}"


def workspace(server: LiveServer, session: str) -> Path:
    """The session's workspace on the host: /workspace inside the sandbox."""
    return server.data_dir / "scratch" / f"u1-{session}"  # the admin is user 1


def run(
    server: LiveServer,
    code: str,
    session: str,
    timeout: float | None = None,
    *,
    http_timeout: float = 60.0,
) -> dict[str, Any]:
    """POST the code to /api/tools/python_coder; the JSON answer plus `wall` (seconds)."""
    body: dict[str, Any] = {"session_id": session, "code": code}
    if timeout is not None:
        body["timeout"] = timeout
    started = time.monotonic()
    response = client(server).post("/api/tools/python_coder", json=body, timeout=http_timeout)
    wall = time.monotonic() - started
    assert response.status_code == 200, (
        f"python_coder answered HTTP {response.status_code} for session {session}: "
        f"{response.text[:1000]}"
    )
    result: dict[str, Any] = response.json()
    result["wall"] = wall
    return result


def stdout(result: dict[str, Any]) -> str:
    return str(result["data"]["stdout"])


def everything(result: dict[str, Any]) -> str:
    """All text the server returned for a run."""
    data = result["data"]
    return "\n".join(
        str(part)
        for part in (data["stdout"], data["stderr"], result.get("error"), result.get("answer"))
        if part
    )


def assert_no_secrets(text: str, secrets: Secrets) -> None:
    for name, value in secrets.values().items():
        assert value not in text, f"{name} leaked into the sandbox's output"


def assert_healthy(server: LiveServer) -> None:
    """The server is alive, /health is ok, and a fresh session can still run code."""
    assert server.process is not None and server.process.poll() is None, "the server died"
    health = httpx.get(f"{server.url}/health", timeout=30)
    assert health.status_code == 200, health.text
    assert health.json().get("status") == "ok", health.text
    result = run(server, "print(1+1)", new_session("health"))
    assert result["success"], result
    assert stdout(result).strip() == "2", result


def set_x(server: LiveServer, sid: str) -> None:
    result = run(server, "x = 41\nprint('SET')", sid)
    assert "SET" in stdout(result), result


def assert_x_kept(server: LiveServer, sid: str) -> None:
    result = run(server, "print(x)", sid)
    assert result["success"], result
    assert stdout(result).strip() == "41", result
