"""Resumable uploads over tus 1.0.0 at /api/tus/, driven by the tuspy client (issue 11).

tuspy and a cut connection need a real server; the protocol's refusals are requests and
whole answers, so that test runs the app in this process (tests/support/app_client.py)."""

from __future__ import annotations

import base64
import hashlib
import io
import socket
from pathlib import Path

import httpx
import pytest
from tusclient import client as tus

from tests.conftest import StartApp, StartServer, write_replies
from tests.support.app_client import InProcessServer
from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for

MB = 1024 * 1024
CONTENT = b"id,value\n" + b"".join(b"%d,%d\n" % (i, i * 7) for i in range(400_000))  # ~5 MB


LIMITS = {"MAX_UPLOAD_SIZE_MB": "16", "MAX_REQUEST_SIZE_MB": "1"}


@pytest.fixture
def server(start_server: StartServer, tmp_path: Path) -> LiveServer:
    return start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []), **LIMITS)


@pytest.fixture
def app(start_app: StartApp, tmp_path: Path) -> InProcessServer:
    return start_app(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []), **LIMITS)


def tus_client(server: LiveServer, token: str | None = None) -> tus.TusClient:
    return tus.TusClient(
        f"{server.url}/api/tus/", headers={"Authorization": f"Bearer {token or server.token()}"}
    )


def metadata(session: str, filename: str) -> str:
    pairs = {"session_id": session, "filename": filename}
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in pairs.items())


def tus_headers(server: LiveServer | InProcessServer, **more: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token()}", "Tus-Resumable": "1.0.0", **more}


def test_an_upload_in_chunks_lands_in_the_session(server: LiveServer) -> None:
    uploader = tus_client(server).uploader(
        file_stream=io.BytesIO(CONTENT),
        chunk_size=MB,  # six PATCHes
        metadata={"session_id": "tus", "filename": "values.csv"},
    )
    uploader.upload_chunk()
    with server.client() as http:
        # Mid-upload: the partial file is nowhere in the session.
        assert http.get("/api/sessions/tus/files").json() == []
        uploader.upload()
        files = {f["path"]: f["size"] for f in http.get("/api/sessions/tus/files").json()}
        assert files == {"uploads/values.csv": len(CONTENT)}
        info = http.get("/api/files/info", params={"session_id": "tus", "name": "values.csv"})
        assert info.status_code == 200 and "value" in str(info.json()["details"])
        download = http.get("/api/sessions/tus/files/uploads/values.csv").content
    assert hashlib.sha256(download).digest() == hashlib.sha256(CONTENT).digest()
    assert list((server.data_dir / "tus").iterdir()) == []  # nothing left behind


def test_a_cut_upload_resumes_where_the_server_says(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url) as http:
        created = http.post(
            "/api/tus/",
            headers=tus_headers(
                server,
                **{"Upload-Length": str(len(CONTENT)), "Upload-Metadata": metadata("cut", "v.csv")},
            ),
        )
        assert created.status_code == 201, created.text
        location = created.headers["location"]
        sent = 3 * MB
        host, port = server.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port))) as raw:
            head = (
                f"PATCH {location} HTTP/1.1\r\nHost: {host}\r\n"
                f"Authorization: Bearer {server.token()}\r\nTus-Resumable: 1.0.0\r\n"
                "Content-Type: application/offset+octet-stream\r\nUpload-Offset: 0\r\n"
                f"Content-Length: {len(CONTENT)}\r\n\r\n"
            )
            raw.sendall(head.encode() + CONTENT[:sent])
        # Cut: the server keeps what arrived, and says so.
        wait_for(lambda: offset(http, server, location) == sent)
    uploader = tus_client(server).uploader(
        file_stream=io.BytesIO(CONTENT), url=f"{server.url}{location}", retries=5, retry_delay=1
    )
    assert uploader.offset == sent  # tuspy asked HEAD
    uploader.upload()
    with server.client() as http:
        download = http.get("/api/sessions/cut/files/uploads/v.csv").content
    assert download == CONTENT


def test_the_protocol_refuses_what_it_must(app: InProcessServer) -> None:
    length = {"Upload-Length": "10", "Upload-Metadata": metadata("p", "a.csv")}
    with app.http() as http:
        options = http.options("/api/tus/")
        assert options.status_code == 204
        assert options.headers["tus-version"] == "1.0.0"
        assert options.headers["tus-max-size"] == str(16 * MB)

        def create(**headers: str) -> httpx.Response:
            return http.post("/api/tus/", headers=tus_headers(app, **headers))

        assert create(**{**length, "Upload-Length": str(17 * MB)}).status_code == 413
        assert create(**{"Upload-Length": "10"}).status_code == 400  # no metadata
        bad = metadata("p", "../x.csv")
        assert create(**{**length, "Upload-Metadata": bad}).status_code == 400
        exe = metadata("p", "tool.exe")
        assert create(**{**length, "Upload-Metadata": exe}).status_code == 415
        unversioned = http.post(
            "/api/tus/", headers={"Authorization": f"Bearer {app.token()}", **length}
        )
        assert unversioned.status_code == 412
        assert (
            http.post("/api/tus/", headers={"Tus-Resumable": "1.0.0", **length}).status_code == 401
        )

        empty = {"Upload-Length": "0", "Upload-Metadata": metadata("p", "empty.csv")}
        assert create(**empty).status_code == 201  # complete at once: no PATCH will come
        assert (app.data_dir / "scratch" / "u1-p" / "uploads" / "empty.csv").read_bytes() == b""

        location = create(**length).headers["location"]
        patch = {"Content-Type": "application/offset+octet-stream", "Upload-Offset": "3"}
        wrong = http.patch(location, content=b"0123456789", headers=tus_headers(app, **patch))
        assert wrong.status_code == 409  # the offset is 0
        too_long = http.patch(
            location,
            content=b"0123456789ABC",
            headers=tus_headers(app, **{**patch, "Upload-Offset": "0"}),
        )
        assert too_long.status_code == 413

        admin = tus_headers(app)
        other = http.post(
            "/api/users", json={"username": "other", "password": "other-password"}, headers=admin
        )
        assert other.status_code == 201, other.text
        stranger = {
            "Authorization": f"Bearer {app.token('other', 'other-password')}",
            "Tus-Resumable": "1.0.0",
        }
        assert http.head(location, headers=stranger).status_code == 404
        assert http.delete(location, headers=stranger).status_code == 404
        assert http.delete(location, headers=admin).status_code == 204
        assert http.head(location, headers=admin).status_code == 404
    assert list((app.data_dir / "tus").iterdir()) == []


def offset(http: httpx.Client, server: LiveServer, location: str) -> int:
    return int(http.head(location, headers=tus_headers(server)).headers["upload-offset"])
