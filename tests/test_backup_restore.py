"""`python -m backend.admin backup|restore` (issue 30): a consistent copy of a serving
server's data, restored into an empty DATA_DIR or database, and refused or reported
clearly when it cannot be."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.admin.__main__ import main
from backend.storage.postgres import PostgresStore
from backend.storage.sqlite import SQLiteStore
from tests.conftest import ADMIN_PASSWORD, scripted_server
from tests.support.admin_cli import admin
from tests.support.agent_script import SLOW_STARTED, react_turn, slow_turn, sse_events
from tests.support.postgres import PostgresServer
from tests.support.waiting import wait_for

SESSIONS = 8
REVIEW = {"when": "[stage: review]", "content": '{"answers_question": true}', "repeat": True}
LIMITS = {
    "USER_MAX_RUNS": str(SESSIONS),
    "USER_MAX_SANDBOXES": str(SESSIONS),
    "HOST_MAX_SANDBOXES": str(SESSIONS),
}
REACT = {"agent_type": "react"}
BOB = {"username": "bob", "password": "bob-password"}
Messages = list[dict[str, Any]]


def run_to_end(http: httpx.Client, message: str, session: str) -> dict[str, Any]:
    """A ReAct turn through /api/runs, followed to its end: its events by name."""
    started = http.post("/api/runs", json={"message": message, "session_id": session, **REACT})
    assert started.status_code == 202, started.text
    events = {}
    with http.stream("GET", f"/api/runs/{started.json()['run_id']}/events") as reply:
        for name, data in sse_events(reply.iter_lines()):
            events[name] = data
            if name == "done":
                break
    return events


def messages(http: httpx.Client, conversation: str) -> Messages:
    detail = http.get(f"/api/conversations/{conversation}")
    assert detail.status_code == 200, detail.text
    return list(detail.json()["messages"])


def test_a_backup_while_eight_sessions_run_turns_restores_every_message_and_variable(
    tmp_path: Path,
) -> None:
    replies = [REVIEW]
    for i in range(SESSIONS):
        code = f"v{i} = {100 * (i + 1)}\nprint('saved', v{i})\n"
        replies += [*react_turn(f"Q-SAVE{i}", code, "It is saved."), *slow_turn(f"Q-SLOW{i}")]
    (tmp_path / "live").mkdir()
    with scripted_server(tmp_path / "live", replies, **LIMITS) as live:
        with live.client() as http:
            assert http.post("/api/users", json=BOB).status_code == 201
        tokens = [live.token(), live.token(BOB["username"], BOB["password"])]

        def turns(i: int) -> tuple[str, str]:
            """A finished turn that saves v<i>, then one whose code is still running."""
            with live.client(tokens[i % 2], timeout=180) as http:
                saved = http.post(
                    "/api/chat",
                    json={"message": f"Q-SAVE{i} keep it", "session_id": f"s{i}", **REACT},
                )
                assert saved.status_code == 200, saved.text
                running = http.post(
                    "/api/runs",
                    json={"message": f"Q-SLOW{i} wait", "session_id": f"s{i}", **REACT},
                )
                assert running.status_code == 202, running.text
            return saved.json()["conversation_id"], running.json()["run_id"]

        with ThreadPoolExecutor(SESSIONS) as pool:
            started = list(pool.map(turns, range(SESSIONS)))
        scratch = live.data_dir / "scratch"
        wait_for(lambda: len(list(scratch.glob(f"*/{SLOW_STARTED}"))) == SESSIONS, timeout=180)
        clients = [live.client(token) for token in tokens]
        acknowledged = [
            messages(clients[i % 2], conversation) for i, (conversation, _) in enumerate(started)
        ]

        backup = admin("backup", str(tmp_path / "backup"), **live.env)

        statuses = {
            clients[i % 2].get(f"/api/runs/{run}").json()["status"]
            for i, (_, run) in enumerate(started)
        }
        for i, (_, run) in enumerate(started):
            clients[i % 2].post(f"/api/runs/{run}/cancel")
        for client in clients:
            client.close()
        server_id = (live.data_dir / "server_id").read_text()

    assert backup.returncode == 0, backup.stderr
    assert statuses == {"running"}  # the backup was taken while every turn ran
    assert not (tmp_path / "backup.partial").exists()
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    left_out = {left["path"]: left["reason"] for left in manifest["not_included"]}
    assert set(left_out) >= {"server_id", "staging"}
    # Whatever a live server keeps in DATA_DIR, the backup knows what it is.
    assert "not known to this server" not in left_out.values(), left_out
    assert "ADMIN_PASSWORD" in {left["path"] for left in manifest["settings_not_included"]}
    assert ADMIN_PASSWORD not in (tmp_path / "backup" / "manifest.json").read_text()

    restored = admin("restore", str(tmp_path / "backup"), DATA_DIR=str(tmp_path / "copy/data"))
    assert restored.returncode == 0, restored.stderr
    assert f"Marked {SESSIONS} turn(s) that were running interrupted" in restored.stdout

    reading = [REVIEW]
    for i in range(SESSIONS):
        reading += react_turn(f"Q-READ{i}", f"print('restored', v{i})\n", "It is back.")
    with scripted_server(tmp_path / "copy", reading, **LIMITS) as copy:
        # The secret key came back: the original server's tokens are still good.
        clients = [copy.client(token, timeout=180) for token in tokens]
        after = [
            messages(clients[i % 2], conversation) for i, (conversation, _) in enumerate(started)
        ]

        def read(i: int) -> dict[str, Any]:
            return run_to_end(clients[i % 2], f"Q-READ{i} show it", f"s{i}")

        with ThreadPoolExecutor(SESSIONS) as pool:
            read_back = list(pool.map(read, range(SESSIONS)))
        for client in clients:
            client.close()
        assert (copy.data_dir / "server_id").read_text() != server_id

    for before, now in zip(acknowledged, after, strict=True):
        assert [m["role"] for m in before] == ["user", "assistant", "user", "assistant"]
        assert [(m["id"], m["role"], m["content"]) for m in now] == [
            (m["id"], m["role"], m["content"]) for m in before
        ]
        assert before[-1]["metadata"]["finish_reason"] == "running"
        assert now[-1]["metadata"]["finish_reason"] == "interrupted"
    for i, events in enumerate(read_back):
        assert events["done"]["status"] == "completed"
        assert events["execution"]["ok"], events["execution"]
        assert events["execution"]["stdout"] == f"restored {100 * (i + 1)}\n"


# A DATA_DIR made by hand, for what the live server cannot show quickly.


def small_data_dir(data_dir: Path) -> dict[str, Any]:
    """A user, a conversation whose turn was running, a workspace with a variable, a
    draft, a planted link and FIFO, a snapshot sharing a file by hard link, logs."""
    store = SQLiteStore(data_dir / "app.db")
    user = store.create_user("ann", "not-a-real-hash")
    conversation = store.conversation_for_session(user.id, "s1", "a title")
    store.add_message(conversation.id, "user", "hello", {})
    store.add_message(conversation.id, "assistant", "", {"finish_reason": "running", "server": "x"})
    store.close()
    workspace = data_dir / "scratch" / "u1-s1"
    for folder in ("uploads", "outputs", "variables", "scripts"):
        (workspace / folder).mkdir(parents=True)
    (workspace / "variables" / "v.json").write_text("300")
    (workspace / "variables" / "v.json.partial").write_text("30")  # a variable being written
    (workspace / "outputs" / ".draft-1234").write_text("half")
    (workspace / "outputs" / "passwd").symlink_to("/etc/passwd")
    os.mkfifo(workspace / "outputs" / "pipe")  # reading it would hang the backup
    snapshot = data_dir / "snapshots" / "u1-s1"
    for message in ("2", "4"):
        (snapshot / message / "files").mkdir(parents=True)
    (snapshot / "2" / "files" / "notes.txt").write_text("unchanged")
    os.link(snapshot / "2" / "files" / "notes.txt", snapshot / "4" / "files" / "notes.txt")
    (snapshot / "6.partial").mkdir()  # a snapshot being taken
    (data_dir / "logs").mkdir()
    (data_dir / "logs" / "prompts.jsonl").write_text('{"a": 1}\n{"b": 2')  # a line being written
    (data_dir / "secret_key").write_text("k" * 64)
    (data_dir / "secret_key").chmod(0o600)
    (data_dir / "server_id").write_text("x")
    (data_dir / "tus").mkdir()
    return {"conversation": conversation.id}


def test_the_copy_skips_links_drafts_and_transient_data_and_keeps_hard_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    small_data_dir(tmp_path / "data")
    monkeypatch.setenv("DATABASE_URL", "")
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    assert main(["backup", str(tmp_path / "backup")]) == 0
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "new"))
    assert main(["restore", str(tmp_path / "backup")]) == 0
    said = capsys.readouterr().out

    new = tmp_path / "new"
    files = sorted(str(p.relative_to(new)) for p in new.rglob("*") if p.is_file())
    assert files == [
        "app.db",
        "logs/prompts.jsonl",
        "scratch/u1-s1/variables/v.json",
        "secret_key",
        "snapshots/u1-s1/2/files/notes.txt",
        "snapshots/u1-s1/4/files/notes.txt",
    ]
    assert (new / "scratch/u1-s1/uploads").is_dir()  # empty folders come back too
    assert (new / "logs/prompts.jsonl").read_text() == '{"a": 1}\n'
    assert (new / "snapshots/u1-s1/4/files/notes.txt").stat().st_nlink == 2
    assert (new / "secret_key").stat().st_mode & 0o777 == 0o600
    variable = "scratch/u1-s1/variables/v.json"  # snapshots compare mtimes: they come back
    assert (new / variable).stat().st_mtime_ns == (tmp_path / "data" / variable).stat().st_mtime_ns
    with contextlib.closing(sqlite3.connect(new / "app.db")) as db:
        rows = db.execute("SELECT role, content, metadata FROM messages ORDER BY id").fetchall()
    assert [(role, content) for role, content, _ in rows] == [("user", "hello"), ("assistant", "")]
    assert json.loads(rows[1][2])["finish_reason"] == "interrupted"
    assert "Marked 1 turn(s) that were running interrupted" in said

    manifest = json.loads((tmp_path / "backup/manifest.json").read_text())
    assert manifest["skipped"] == {"files being written": 3, "links and other non-files": 2}
    left = {entry["path"]: entry["reason"] for entry in manifest["not_included"]}
    assert set(left) == {"server_id", "tus"}
    assert "new one" in left["server_id"]


def test_restore_refuses_a_non_empty_dir_unless_forced_and_names_a_damaged_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    small_data_dir(tmp_path / "data")
    monkeypatch.setenv("DATABASE_URL", "")
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    backup = tmp_path / "backup"
    assert main(["backup", str(backup)]) == 0
    assert main(["backup", str(backup)]) == 1
    assert "already exists" in capsys.readouterr().err

    # Into the DATA_DIR it came from: refused, then done with --force, nothing deleted.
    assert main(["restore", str(backup)]) == 1
    refused = capsys.readouterr().err
    assert "is not empty" in refused and "--force" in refused and "Traceback" not in refused
    assert main(["restore", "--force", str(backup)]) == 0
    aside = next((tmp_path / "data").glob(".before-restore-*"))
    assert (aside / "server_id").read_text() == "x"
    assert f"Moved aside (delete once the server works): {aside}" in capsys.readouterr().out

    monkeypatch.setenv("DATA_DIR", str(tmp_path / "new"))
    variable = backup / "data/scratch/u1-s1/variables/v.json"
    variable.write_text("301")
    assert main(["restore", str(backup)]) == 1
    damaged = capsys.readouterr().err
    assert "data/scratch/u1-s1/variables/v.json: checksum mismatch" in damaged
    assert "nothing was restored" in damaged and "Traceback" not in damaged
    assert not (tmp_path / "new").exists()

    (backup / "manifest.json").write_text('{"format": 1, "files": "none"}')
    assert main(["restore", str(backup)]) == 1
    assert "is not a valid backup manifest" in capsys.readouterr().err
    backup.rename(tmp_path / "cut.partial")  # as a backup cut off leaves it
    assert main(["restore", str(tmp_path / "cut")]) == 1
    missing = capsys.readouterr().err
    assert "no such backup folder" in missing and "was cut off" in missing


def test_postgresql_is_dumped_and_restored_into_an_empty_database_only(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    postgres_server: PostgresServer,
) -> None:
    source = postgres_server.new_database()
    store = PostgresStore(source)
    user = store.create_user("ann", "not-a-real-hash")
    conversation = store.conversation_for_session(user.id, "s1", "a title")
    store.add_message(conversation.id, "user", "hello", {})
    store.add_message(conversation.id, "assistant", "", {"finish_reason": "running", "server": "x"})
    store.close()
    (tmp_path / "data/scratch/u1-s1/variables").mkdir(parents=True)
    (tmp_path / "data/scratch/u1-s1/variables/v.json").write_text("300")
    monkeypatch.setenv("DATABASE_URL", source)
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "data"))
    assert main(["backup", str(tmp_path / "backup")]) == 0
    assert "postgresql.dump" in (tmp_path / "backup/manifest.json").read_text()
    assert postgres_server.password not in (tmp_path / "backup/manifest.json").read_text()

    target = postgres_server.new_database()
    monkeypatch.setenv("DATABASE_URL", target)
    monkeypatch.setenv("DATA_DIR", str(tmp_path / "new"))
    assert main(["restore", str(tmp_path / "backup")]) == 0
    restored = PostgresStore(target)
    try:
        found = restored.list_messages(conversation.id)
    finally:
        restored.close()
    assert [(m.role, m.content) for m in found] == [("user", "hello"), ("assistant", "")]
    assert found[1].metadata["finish_reason"] == "interrupted"
    assert (tmp_path / "new/scratch/u1-s1/variables/v.json").read_text() == "300"
    capsys.readouterr()

    monkeypatch.setenv("DATA_DIR", str(tmp_path / "other"))
    assert main(["restore", str(tmp_path / "backup")]) == 1
    assert "table(s)" in capsys.readouterr().err
    assert main(["restore", "--force", str(tmp_path / "backup")]) == 0
