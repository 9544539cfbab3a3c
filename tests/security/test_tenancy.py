"""Tenancy: every way a session id comes in, tried as a hostile second user would.

Odd and traversal ids go through every route, form field, header and stored id and
are refused without a trace; another user's ids are "not found" (or name the
caller's own, separate session); a deleted session's id starts empty when used
again. The holes these keep shut (issue 24): the tus route took `..` from its
metadata, `/v1/responses` took the stored id back unchecked and bound DATA_DIR into
the sandbox; deleting a conversation left its workspace, sandbox, checkpoints,
steps and uploads for the next user of the id.
"""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD, write_replies
from tests.support.agent_script import SALES, react_turn, upload
from tests.support.live_server import LiveServer

ODD_IDS = [
    "..",
    ".",
    "/",
    "a/../..",
    "../../etc",
    ".x",
    "x" * 129,
    "a\x00b",
    "a\nb",
    "ａｄｍｉｎ",  # fullwidth look-alikes
    "\u0430dmin",  # a Cyrillic a
    "a b",
    "",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("tenancy")
    live = LiveServer(
        root / "data",
        LLM_BACKEND="scripted",
        SCRIPTED_REPLIES=write_replies(root / "replies.json", react_turn("Q-DEL")),
        ADMIN_PASSWORD=ADMIN_PASSWORD,
    )
    live.start()
    with live.client() as admin:
        created = admin.post("/api/users", json={"username": "mallory", "password": "m" * 12})
    assert created.status_code == 201, created.text
    try:
        yield live
    finally:
        live.stop()


@pytest.fixture(scope="module")
def mallory(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client(server.token("mallory", "m" * 12)) as client:
        yield client


def _tus_metadata(session_id: str, filename: str = "a.csv") -> str:
    def encoded(value: str) -> str:
        return base64.b64encode(value.encode("utf-8", "surrogatepass")).decode()

    return f"session_id {encoded(session_id)},filename {encoded(filename)}"


def _attempts(client: httpx.Client, odd: str) -> dict[str, httpx.Response]:
    """Every way in that takes a session id, with `odd` as the id."""
    in_path = quote(odd, safe="")
    tus = {"Tus-Resumable": "1.0.0", "Upload-Length": "4", "Upload-Metadata": _tus_metadata(odd)}
    return {
        "chat": client.post("/api/chat", json={"message": "hi", "session_id": odd}),
        "runs": client.post("/api/runs", json={"message": "hi", "session_id": odd}),
        "completions": client.post(
            "/v1/chat/completions",
            json={"model": "x", "messages": [{"role": "user", "content": "hi"}], "session_id": odd},
        ),
        "responses": client.post(
            "/v1/responses", json={"model": "x", "input": "hi", "session_id": odd}
        ),
        "form upload": client.post(
            "/api/upload", data={"session_id": odd}, files={"file": ("a.csv", b"a\n1\n")}
        ),
        "put upload": client.put(f"/api/sessions/{in_path}/uploads/a.csv", content=b"a\n1\n"),
        "tus": client.post("/api/tus/", headers=tus),
        "files": client.get("/api/files", params={"session_id": odd}),
        "file info": client.get("/api/files/info", params={"session_id": odd, "name": "a.csv"}),
        "extract": client.post("/api/files/extract", json={"session_id": odd, "name": "a.zip"}),
        "session files": client.get(f"/api/sessions/{in_path}/files"),
        "session file": client.get(f"/api/sessions/{in_path}/files/notepad.json"),
        "export": client.get(f"/api/sessions/{in_path}/export"),
        "code": client.post(
            "/api/tools/python_coder", json={"session_id": odd, "code": "print(1)", "mode": "code"}
        ),
    }


@pytest.mark.parametrize("odd", ODD_IDS, ids=lambda odd: repr(odd)[:20])
def test_an_odd_session_id_is_refused_on_every_way_in(
    server: LiveServer, mallory: httpx.Client, odd: str
) -> None:
    before = sorted(p.name for p in server.data_dir.iterdir())
    answers = _attempts(mallory, odd)
    wrong = {
        route: (response.status_code, response.text[:200])
        for route, response in answers.items()
        if response.status_code not in (400, 404, 405, 422)
    }
    assert not wrong, wrong
    leaked = [route for route, answer in answers.items() if str(server.data_dir) in answer.text]
    assert not leaked, leaked  # no server path in any answer
    assert sorted(p.name for p in server.data_dir.iterdir()) == before  # nothing made
    scratch = server.data_dir / "scratch"
    made = list(scratch.iterdir()) if scratch.exists() else []
    assert all(p.name.startswith("u") for p in made), made
    assert [c for c in mallory.get("/api/conversations").json() if c["session_id"] == odd] == []
    assert httpx.get(f"{server.url}/health").status_code == 200


def test_the_tus_route_never_stores_a_traversal_id_that_responses_could_bind(
    server: LiveServer, mallory: httpx.Client
) -> None:
    """The reported chain: `..` through tus metadata, then `previous_response_id`."""
    tus = {
        "Tus-Resumable": "1.0.0",
        "Upload-Length": "0",
        "Upload-Metadata": _tus_metadata(".."),
    }
    created = mallory.post("/api/tus/", headers=tus)
    assert created.status_code == 400, created.text
    for conversation in mallory.get("/api/conversations").json():
        assert conversation["session_id"] not in ("..", "/")
    # No stored response id of anyone's leads there either: made-up ids are unknown.
    for previous in ("resp_" + "." * 48, "resp_" + "0" * 48, "resp_../../", "x"):
        answer = mallory.post(
            "/v1/responses", json={"model": "x", "input": "hi", "previous_response_id": previous}
        )
        assert answer.status_code == 404, answer.text


def test_another_users_response_and_conversation_ids_are_not_found(
    server: LiveServer, mallory: httpx.Client
) -> None:
    upload(server, "admins-own")
    with server.client() as admin:
        (conversation,) = [
            c for c in admin.get("/api/conversations").json() if c["session_id"] == "admins-own"
        ]
    conversation_id = conversation["id"]
    previous = f"resp_{conversation_id}{'0' * 16}"
    answers = [
        mallory.post(
            "/v1/responses", json={"model": "x", "input": "hi", "previous_response_id": previous}
        ),
        mallory.get(f"/api/conversations/{conversation_id}"),
        mallory.delete(f"/api/conversations/{conversation_id}"),
        mallory.get("/api/sessions/admins-own/files"),
        mallory.get("/api/sessions/admins-own/files/uploads/sales.csv"),
        mallory.get("/api/sessions/admins-own/export"),
        mallory.get("/api/files", params={"session_id": "admins-own"}),
    ]
    assert [a.status_code for a in answers] == [404] * len(answers), [a.text for a in answers]
    with server.client() as admin:  # still there for its owner
        listed = admin.get("/api/sessions/admins-own/files").json()
    assert "uploads/sales.csv" in [f["path"] for f in listed]


def test_two_users_who_pick_the_same_name_get_two_sessions(
    server: LiveServer, mallory: httpx.Client
) -> None:
    code = {"session_id": "analysis", "mode": "code"}
    with server.client() as admin:
        assert admin.post("/api/tools/python_coder", json={**code, "code": "x = 'admin'"}).json()[
            "success"
        ]
    mine = mallory.post("/api/tools/python_coder", json={**code, "code": "x = 'mallory'"})
    assert mine.status_code == 200 and mine.json()["success"], mine.text
    with server.client() as admin:
        seen = admin.post("/api/tools/python_coder", json={**code, "code": "print(x)"}).json()
    assert seen["data"]["stdout"].strip() == "admin"
    theirs = mallory.post("/api/tools/python_coder", json={**code, "code": "print(x)"}).json()
    assert theirs["data"]["stdout"].strip() == "mallory"


def _checkpoint_threads(server: LiveServer) -> list[str]:
    path = server.data_dir / "agent_checkpoints.sqlite3"
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT DISTINCT thread_id FROM checkpoints")]


def _session_steps(server: LiveServer, key: str) -> int:
    with sqlite3.connect(server.data_dir / "app.db") as db:
        query = "SELECT count(*) FROM session_steps WHERE session_id = ?"
        return int(db.execute(query, (key,)).fetchone()[0])


def test_a_deleted_session_leaves_nothing_and_its_id_starts_empty(server: LiveServer) -> None:
    key = "u1-doomed"  # the admin's "doomed"
    workspace = server.data_dir / "scratch" / key
    upload(server, "doomed")
    with server.client(timeout=120) as admin:
        turn = admin.post(
            "/api/chat",
            json={"message": "Q-DEL what is the mean price?", "session_id": "doomed"},
        )
        assert turn.status_code == 200, turn.text
        assert admin.post(
            "/api/tools/python_coder",
            json={"session_id": "doomed", "code": "secret = 42", "mode": "code"},
        ).json()["success"]
        pending = admin.post(
            "/api/tus/",
            headers={
                "Tus-Resumable": "1.0.0",
                "Upload-Length": "100",
                "Upload-Metadata": _tus_metadata("doomed", "later.csv"),
            },
        )
        assert pending.status_code == 201
        assert workspace.is_dir() and _session_steps(server, key) > 0
        assert any(thread.endswith(f":{key}") for thread in _checkpoint_threads(server))

        deleted = admin.delete(f"/api/conversations/{turn.json()['conversation_id']}")
        assert deleted.status_code == 204

        assert not workspace.exists()
        assert _session_steps(server, key) == 0
        assert not any(thread.endswith(f":{key}") for thread in _checkpoint_threads(server))
        assert (
            admin.head(pending.headers["Location"], headers={"Tus-Resumable": "1.0.0"}).status_code
            == 404
        )
        assert admin.get("/api/sessions/doomed/files").status_code == 404

        again = admin.post(
            "/api/tools/python_coder",
            json={"session_id": "doomed", "code": "print(secret)", "mode": "code"},
        ).json()
        assert not again["success"] and "NameError" in again["error"]  # the warm sandbox is gone
        files = [f["path"] for f in admin.get("/api/sessions/doomed/files").json()]
        assert "uploads/sales.csv" not in files
        export = admin.get("/api/sessions/doomed/export", params={"format": "py"})
        assert export.status_code == 200 and "secret = 42" not in export.text


def test_uploads_of_a_session_stay_with_their_owner(
    server: LiveServer, mallory: httpx.Client
) -> None:
    assert (
        mallory.post(
            "/api/upload", data={"session_id": "shared-name"}, files={"file": ("m.csv", SALES)}
        ).status_code
        == 201
    )
    with server.client() as admin:
        theirs = admin.get("/api/sessions/shared-name/files")
    assert theirs.status_code == 404
    assert not Path(server.data_dir / "scratch" / "u1-shared-name").exists()
