"""Today's server on data directories that older versions of this project made.

Each tests/fixtures/upgrade/schema-<N>.tar.gz holds a DATA_DIR that a commit at schema N
wrote with its own server (tests/fixtures/upgrade/build.py; its README names the commits)
and `expected.json`, what that server answered. Today's server must migrate it at start
and still serve every user's conversations, messages and workspace files, and a new turn
must find the variables the old sandbox saved.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.storage.migrations import MIGRATIONS
from backend.storage.workspaces import is_user_file
from tests.conftest import write_replies
from tests.support.agent_script import react_turn, sse_events
from tests.support.live_server import LiveServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "upgrade"
ARCHIVES = sorted(FIXTURES.glob("schema-*.tar.gz"), key=lambda p: int(p.name.split("-")[1][:-7]))
REVIEW = {"when": "[stage: review]", "content": '{"answers_question": true}', "repeat": True}
VARS = "VARS="
Upgraded = tuple[LiveServer, dict[str, Any]]  # today's server, and the fixture's expected.json


def probe_code(names: list[str]) -> str:
    """Prints the variables as build.py's probe did (frames and numpy values as plain ones)."""
    values = ", ".join(f"{name!r}: {name}" for name in names)
    plain = "lambda o: o.to_dict() if hasattr(o, 'to_dict') else o.item()"
    return f"import json\nprint({VARS!r} + json.dumps({{{values}}}, default={plain}))\n"


def probe_tag(session_id: str) -> str:
    return f"Q-PROBE-{session_id}"


@pytest.fixture(params=ARCHIVES, ids=[p.name.removesuffix(".tar.gz") for p in ARCHIVES])
def upgraded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Upgraded]:
    """Today's server, started on the fixture's extracted DATA_DIR, and its expected.json."""
    with tarfile.open(request.param) as archive:
        archive.extractall(tmp_path, filter="data")
    expected = json.loads((tmp_path / "expected.json").read_text())
    replies: list[dict[str, Any]] = [REVIEW]
    for user in expected["users"]:
        for conversation in user["conversations"]:
            if conversation["variables"]:
                tag = probe_tag(conversation["session_id"])
                code = probe_code(list(conversation["variables"]))
                replies += react_turn(tag, code=code, answer=f"{tag} printed.")
    admin = next(u for u in expected["users"] if u["username"] == "admin")
    server = LiveServer(
        tmp_path / "data",
        LLM_BACKEND="scripted",
        SCRIPTED_REPLIES=write_replies(tmp_path / "replies.json", replies),
        ADMIN_PASSWORD=admin["password"],
    )
    server.start()
    try:
        yield server, expected
    finally:
        server.stop()


def test_todays_server_keeps_what_an_older_version_stored(upgraded: Upgraded) -> None:
    server, expected = upgraded
    assert expected["schema_version"] < len(MIGRATIONS)
    with contextlib.closing(sqlite3.connect(server.data_dir / "app.db")) as db:
        assert db.execute("SELECT version FROM schema_version").fetchall() == [(len(MIGRATIONS),)]

    for user in expected["users"]:
        with server.client(server.token(user["username"], user["password"])) as http:
            check_conversations(http, user["conversations"])
            for conversation in user["conversations"]:
                check_files(http, conversation)
            for conversation in user["conversations"]:
                check_variables(http, conversation)


def check_conversations(http: httpx.Client, expected: list[dict[str, Any]]) -> None:
    listed = http.get("/api/conversations")
    assert listed.status_code == 200, listed.text
    summaries = {(c["id"], c["session_id"], c["title"]) for c in listed.json()}
    assert summaries == {(c["id"], c["session_id"], c["title"]) for c in expected}
    for conversation in expected:
        detail = http.get(f"/api/conversations/{conversation['id']}")
        assert detail.status_code == 200, detail.text
        messages = [{"role": m["role"], "content": m["content"]} for m in detail.json()["messages"]]
        assert messages == conversation["messages"], conversation["id"]


def check_files(http: httpx.Client, conversation: dict[str, Any]) -> None:
    session_id = conversation["session_id"]
    listed = http.get(f"/api/sessions/{session_id}/files")
    assert listed.status_code == 200, listed.text
    sizes = {f["path"]: f["size"] for f in listed.json()}
    for file in conversation["files"]:
        # Since 1caaa37 the listing leaves out a shown table's own Parquet (/tables pages
        # it), and since issue 39 all the server's own files (the notepad, the variables,
        # the run scripts); older versions listed them. They must still be there.
        if is_user_file(file["path"]):
            assert sizes.get(file["path"]) == file["size"], (session_id, file["path"], sizes)
        download = http.get(f"/api/sessions/{session_id}/files/{file['path']}")
        assert download.status_code == 200, (file["path"], download.text)
        digest = hashlib.sha256(download.content).hexdigest()
        assert digest == file["sha256"], (session_id, file["path"])


def check_variables(http: httpx.Client, conversation: dict[str, Any]) -> None:
    """A turn today prints the variables the old sandbox saved: they load with their values."""
    if not conversation["variables"]:
        return
    tag = probe_tag(conversation["session_id"])
    body = {
        "message": f"{tag} print the saved variables",
        "session_id": conversation["session_id"],
        "agent_type": "react",
        "stream": True,
    }
    events: list[tuple[str, dict[str, Any]]] = []
    with http.stream("POST", "/api/chat", json=body, timeout=180) as reply:
        assert reply.status_code == 200, reply.read().decode()
        events.extend(sse_events(reply.iter_lines()))
    runs = [data for name, data in events if name == "execution"]
    assert runs and all(run["ok"] for run in runs), events
    printed = [line for run in runs for line in run["stdout"].splitlines() if line.startswith(VARS)]
    assert printed, runs
    assert json.loads(printed[-1].removeprefix(VARS)) == conversation["variables"]
    assert dict(events)["final"]["text"].startswith(f"{tag} printed.")
