"""PUT /api/sessions/{id}/uploads/{name}: a raw body streamed to disk (issue 11).

Chunked bodies and cut connections need a real server; the checks of names and sessions
are requests and whole answers, so that test runs the app in this process
(tests/support/app_client.py)."""

from __future__ import annotations

import hashlib
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import StartApp, StartServer, write_replies
from tests.support.app_client import InProcessServer
from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for

MB = 1024 * 1024


LIMITS = {"MAX_UPLOAD_SIZE_MB": "8", "MAX_REQUEST_SIZE_MB": "1"}


@pytest.fixture
def server(start_server: StartServer, tmp_path: Path) -> LiveServer:
    return start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []), **LIMITS)


@pytest.fixture
def app(start_app: StartApp, tmp_path: Path) -> InProcessServer:
    return start_app(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []), **LIMITS)


def csv_pieces(rows: int) -> Iterator[bytes]:
    """A CSV in pieces, so httpx sends it chunked, with no Content-Length."""
    yield b"id,value,label\n"
    for start in range(0, rows, 10_000):
        yield b"".join(
            b"%d,%d.5,row-%d\n" % (i, i * 3, i) for i in range(start, min(start + 10_000, rows))
        )


def uploads_dir(server: LiveServer | InProcessServer, session: str) -> Path:
    return server.data_dir / "scratch" / f"u1-{session}" / "uploads"


def test_a_streamed_csv_lands_whole_and_is_described(server: LiveServer) -> None:
    body = b"".join(csv_pieces(200_000))  # about 5 MB: over MAX_REQUEST_SIZE_MB
    with server.client() as http:
        response = http.put("/api/sessions/big/uploads/data.csv", content=csv_pieces(200_000))
        assert response.status_code == 201, response.text
        uploaded = response.json()
        assert uploaded["path"] == "uploads/data.csv" and uploaded["size"] == len(body)
        assert "value" in str(uploaded["details"])  # described like any upload: its columns
        listed = {f["path"]: f["size"] for f in http.get("/api/sessions/big/files").json()}
        assert listed["uploads/data.csv"] == len(body)
        download = http.get("/api/sessions/big/files/uploads/data.csv")
    assert hashlib.sha256(download.content).digest() == hashlib.sha256(body).digest()


def test_over_the_cap_is_refused_and_leaves_nothing(server: LiveServer) -> None:
    with server.client() as http:
        declared = http.put(
            "/api/sessions/cap/uploads/big.csv",
            content=b"x" * (9 * MB),  # Content-Length: refused before reading
        )
        assert declared.status_code == 413, declared.text
        assert "MAX_UPLOAD_SIZE_MB" in declared.json()["detail"]
        streamed = http.put(
            "/api/sessions/cap/uploads/big.csv", content=(b"y" * MB for _ in range(9))
        )
        assert streamed.status_code == 413, streamed.text
        listed = [f["path"] for f in http.get("/api/sessions/cap/files").json()]
        assert listed == [], listed
    assert list(uploads_dir(server, "cap").iterdir()) == []  # no draft left behind


def test_more_than_the_disk_can_take_is_507(start_server: StartServer, tmp_path: Path) -> None:
    replies = write_replies(tmp_path / "r.json", [])
    # A quota past a petabyte: what refuses it is the disk, not the user's quota.
    server = start_server(
        SCRIPTED_REPLIES=replies, MAX_UPLOAD_SIZE_MB=str(10**12), USER_MAX_DISK_MB=str(10**9)
    )
    host, port = server.url.removeprefix("http://").split(":")
    headers = {"Authorization": f"Bearer {server.token()}"}
    # Declare a petabyte and send nothing: the server must answer before reading.
    with socket.create_connection((host, int(port))) as raw:
        request = (
            "PUT /api/sessions/disk/uploads/huge.csv HTTP/1.1\r\n"
            f"Host: {host}\r\nAuthorization: {headers['Authorization']}\r\n"
            f"Content-Length: {10**15}\r\nConnection: close\r\n\r\n"
        )
        raw.sendall(request.encode())
        answer = b"".join(iter(lambda: raw.recv(65536), b"")).decode()  # until it closes
    assert answer.startswith("HTTP/1.1 507"), answer[:300]
    assert "disk space" in answer


def test_names_and_sessions_are_checked(app: InProcessServer) -> None:
    with app.client() as http:
        assert http.put("/api/sessions/s/uploads/.hidden.csv", content=b"a\n").status_code == 400
        assert http.put("/api/sessions/s/uploads/tool.exe", content=b"a\n").status_code == 415
        assert http.put("/api/sessions/s/uploads/ok.csv", content=b"a\n1\n").status_code == 201
    other = app.request(
        "POST",
        "/api/users",
        json={"username": "other", "password": "other-password"},
        headers={"Authorization": f"Bearer {app.token()}"},
    )
    assert other.status_code == 201, other.text
    with app.client(app.token("other", "other-password")) as http:
        # Their own session "s": the admin's file is neither seen nor replaced.
        response = http.put("/api/sessions/s/uploads/ok.csv", content=b"a\n2\n")
        assert response.status_code == 201
    assert (uploads_dir(app, "s") / "ok.csv").read_bytes() == b"a\n1\n"
    with app.client() as http:
        assert http.get("/api/sessions/s/files/uploads/ok.csv").content == b"a\n1\n"
    unauthenticated = app.request("PUT", "/api/sessions/s/uploads/x.csv", content=b"a\n")
    assert unauthenticated.status_code == 401


def test_a_cut_upload_is_never_listed_and_leaves_nothing(server: LiveServer) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    with server.client() as http:
        assert http.put("/api/sessions/cut/uploads/seed.csv", content=b"a\n1\n").status_code == 201
        raw = socket.create_connection((host, int(port)))
        request = (
            "PUT /api/sessions/cut/uploads/partial.csv HTTP/1.1\r\n"
            f"Host: {host}\r\nAuthorization: {http.headers['Authorization']}\r\n"
            f"Content-Length: {7 * MB}\r\n\r\n"
        )
        raw.sendall(request.encode() + b"a,b\n" + b"1,2\n" * MB)  # 4 MB of 7: one write lands
        uploads = uploads_dir(server, "cut")
        # The draft is written outside the workspace, in the server's own staging folder.
        drafts = server.data_dir / "staging" / "u1-cut" / "drafts"
        wait_for(lambda: drafts.is_dir() and any(drafts.iterdir()))
        assert [p.name for p in uploads.iterdir()] == ["seed.csv"]
        listed = [f["path"] for f in http.get("/api/sessions/cut/files").json()]
        assert listed == ["uploads/seed.csv"], listed
        data_files = [f["name"] for f in http.get("/api/files?session_id=cut").json()]
        assert data_files == ["uploads/seed.csv"], data_files
        raw.close()  # cut off mid-body
        wait_for(lambda: not any(drafts.iterdir()))
        assert [p.name for p in uploads.iterdir()] == ["seed.csv"]
