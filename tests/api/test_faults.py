"""Faults survived: the server killed mid-run, the sandbox killed from outside, and the
database held by another process (issue 12)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import StartServer, write_replies
from tests.support.agent_script import SLOW_CODE, SLOW_STARTED, react_turn, slow_turn, upload
from tests.support.live_server import LiveServer
from tests.support.processes import descendants
from tests.support.waiting import wait_for


def run_code(server: LiveServer, session: str, code: str) -> dict[str, Any]:
    with server.client(timeout=120) as http:
        response = http.post("/api/tools/python_coder", json={"session_id": session, "code": code})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def test_a_server_killed_mid_run_stores_the_turn_as_interrupted_and_goes_on(
    start_server: StartServer, tmp_path: Path
) -> None:
    replies = [*slow_turn("Q-SLOW"), *react_turn("Q-NEXT")]
    server = start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", replies))
    upload(server, "k9")
    assert run_code(server, "k9", "x = 41")["success"]
    body = {"message": "Q-SLOW compute it slowly", "session_id": "k9", "agent_type": "react"}
    cut = threading.Thread(target=lambda: _post_until_cut(server, body), daemon=True)
    cut.start()
    wait_for((server.data_dir / "scratch/u1-k9" / SLOW_STARTED).exists, timeout=60)
    server.kill9()
    cut.join(timeout=30)

    server.start()
    with server.client() as http:
        conversation = http.get("/api/conversations").json()[0]
        messages = http.get(f"/api/conversations/{conversation['id']}").json()["messages"]
    slow = [m for m in messages if m["role"] == "assistant"][-1]
    assert slow["metadata"]["finish_reason"] == "interrupted", slow
    assert "stopped while this turn was running" in slow["metadata"]["error"]
    assert [m["content"] for m in messages if m["role"] == "user"][-1] == body["message"]
    assert run_code(server, "k9", "print(x + 1)")["data"]["stdout"] == "42\n"  # variables kept
    with server.client(timeout=120) as http:
        after = http.post(
            "/api/chat", json={"message": "Q-NEXT what is the mean price?", "session_id": "k9"}
        ).json()
    assert after["answer"] == "The mean price is 20.0.", after


def _post_until_cut(server: LiveServer, body: dict[str, Any]) -> None:
    try:
        with server.client(timeout=120) as http:
            http.post("/api/chat", json=body)
    except httpx.HTTPError:
        pass  # the server died under the request: that is the point


def test_a_sandbox_killed_from_outside_mid_run_is_a_clean_error(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []))
    assert run_code(server, "outside", "x = 41")["success"]
    results: list[dict[str, Any]] = []
    slow = threading.Thread(target=lambda: results.append(run_code(server, "outside", SLOW_CODE)))
    slow.start()
    wait_for((server.data_dir / "scratch/u1-outside" / SLOW_STARTED).exists, timeout=60)
    assert server.process is not None
    sandboxes = [
        pid
        for pid in descendants(server.process.pid)
        if b"bwrap" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    ]
    assert sandboxes, "no bubblewrap process under the server"
    for pid in sandboxes:
        os.kill(pid, signal.SIGKILL)
    slow.join(timeout=60)
    assert results and not results[0]["success"], results
    assert results[0]["error"] and "Traceback" not in results[0]["error"]
    assert run_code(server, "outside", "print(x + 1)")["data"]["stdout"] == "42\n"


LOCKER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(10)
db.execute("COMMIT")
"""


def test_a_database_held_by_another_process_is_waited_for_never_a_500(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", [{"content": "Hi.", "repeat": True}])
    )
    token = server.token()
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(server.data_dir / "app.db")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
            chat = http.post("/api/chat", json={"message": "hello", "session_id": "held"})
            listed = http.get("/api/conversations")
    finally:
        locker.wait(timeout=30)
        if locker.stdout is not None:
            locker.stdout.close()
    for response in (chat, listed):
        assert response.status_code in (200, 503), response.text
        if response.status_code == 503:
            assert response.headers["Retry-After"] and "database is busy" in response.text
    assert chat.status_code == 200 and chat.json()["answer"] == "Hi."  # it waited for the lock
    check = sqlite3.connect(server.data_dir / "app.db")
    assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    check.close()
