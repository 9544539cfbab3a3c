"""`python -m backend.storage.migrate`: a SQLite DATA_DIR moves into PostgreSQL whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg

from tests.conftest import StartServer, write_replies
from tests.support.agent_script import react_turn, upload
from tests.support.postgres import PostgresServer

ROOT = Path(__file__).resolve().parents[2]


def migrate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "backend.storage.migrate", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_sqlite_data_dir_continues_on_postgres(
    start_server: StartServer, tmp_path: Path, postgres_server: PostgresServer
) -> None:
    replies = [
        {"when": ["[stage: react]", "Q-AFTER"], "content": "Final Answer: Still 20.0."},
        *react_turn("Q-BEFORE"),
    ]
    server = start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", replies))
    upload(server, "moving")
    with server.client(timeout=120) as http:
        first = http.post(
            "/api/chat", json={"message": "Q-BEFORE the mean price?", "session_id": "moving"}
        ).json()
        before = http.get(f"/api/conversations/{first['conversation_id']}").json()
    server.stop()

    url = postgres_server.new_database()
    done = migrate("--data-dir", str(server.data_dir), "--to", url)
    assert done.returncode == 0, done.stderr
    assert "1 users, 1 conversations, 2 messages" in done.stdout
    assert "1 session_steps" in done.stdout  # the run the session's export replays
    assert postgres_server.password not in done.stdout + done.stderr
    checkpoints = int(done.stdout.split(" checkpoints")[0].rsplit(" ", 1)[-1])
    assert checkpoints > 0

    server.env["DATABASE_URL"] = url
    server.start()
    with server.client(timeout=120) as http:
        after = http.get(f"/api/conversations/{first['conversation_id']}").json()
        question = "Q-AFTER and what was the csv mean again?"
        second = http.post("/api/chat", json={"message": question, "session_id": "moving"}).json()
    assert after["messages"] == before["messages"]  # ids, text and metadata, unchanged
    with server.client() as http:
        exported = http.get("/api/sessions/moving/export?format=py").text
    assert "print('mean price:', df1['price'].mean())" in exported
    assert "answer" in second, second
    assert second["answer"] == "Still 20.0." and second["agent_type"] == "react"
    log = (server.data_dir / "logs" / "prompts.jsonl").read_text().splitlines()
    prompt = next(
        json.loads(line)["prompt"][-1]["content"]
        for line in log
        if '"stage": "react"' in line and "Q-AFTER" in line
    )
    # The agent's memory of the first turn came through the copied checkpoint.
    assert "python_coder(Q-BEFORE mean price) → mean price: 20.0" in prompt
    with psycopg.connect(url) as db:  # new rows number on after the copied ones
        ids = [row[0] for row in db.execute("SELECT id FROM messages ORDER BY id")]
    assert len(ids) == 4 and ids == sorted(set(ids))


def test_a_second_copy_into_the_same_database_is_refused(
    start_server: StartServer, tmp_path: Path, postgres_server: PostgresServer
) -> None:
    server = start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []))
    server.stop()
    url = postgres_server.new_database()
    assert migrate("--data-dir", str(server.data_dir), "--to", url).returncode == 0
    again = migrate("--data-dir", str(server.data_dir), "--to", url)
    assert again.returncode == 1
    assert "already has users: copy into an empty one" in again.stderr
    assert "Traceback" not in again.stderr


def test_bad_arguments_are_one_line_errors(tmp_path: Path) -> None:
    no_url = migrate("--data-dir", str(tmp_path), "--to", "sqlite:///x.db")
    assert no_url.returncode == 1 and "must be a postgresql:// URL" in no_url.stderr
    no_data = migrate("--data-dir", str(tmp_path), "--to", "postgresql://u@127.0.0.1/db")
    assert no_data.returncode == 1 and f"no app.db in {tmp_path}" in no_data.stderr
