"""OpenAI's Files and Containers APIs through the official SDK, unchanged, on a live server:
a file's life, a container's files (uploads and copies of the user's files), the walls
between users, and a container's expiry."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import scripted_server
from tests.support.live_server import LiveServer

PASSWORD = "a-long-enough-password"
CSV = b"region,amount\nnorth,10\nsouth,32\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(tmp_path_factory.mktemp("files"), []) as live:
        yield live


def sdk_client(server: LiveServer, name: str) -> openai.OpenAI:
    """A new user's client, authenticated by a personal API key."""
    with server.client() as admin:
        created = admin.post("/api/users", json={"username": name, "password": PASSWORD})
        assert created.status_code == 201, created.text
    with server.client(server.token(name, PASSWORD)) as http:
        key = http.post("/api/keys", json={"name": "sdk"})
        assert key.status_code == 201, key.text
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=key.json()["key"], max_retries=0)


@pytest.fixture(scope="module")
def alice(server: LiveServer) -> openai.OpenAI:
    return sdk_client(server, "alice")


@pytest.fixture(scope="module")
def mallory(server: LiveServer) -> openai.OpenAI:
    return sdk_client(server, "mallory")


def test_a_file_is_uploaded_listed_read_and_deleted(alice: openai.OpenAI) -> None:
    created = alice.files.create(file=("sales.csv", CSV), purpose="user_data")
    assert created.id.startswith("file-") and created.object == "file"
    assert (created.filename, created.bytes, created.purpose) == (
        "sales.csv",
        len(CSV),
        "user_data",
    )
    assert alice.files.retrieve(created.id).filename == "sales.csv"
    assert created.id in [f.id for f in alice.files.list()]
    assert alice.files.content(created.id).read() == CSV
    deleted = alice.files.delete(created.id)
    assert deleted.deleted and deleted.id == created.id
    with pytest.raises(openai.NotFoundError):
        alice.files.retrieve(created.id)
    with pytest.raises(openai.NotFoundError):
        alice.files.content(created.id)


def test_files_are_paged_newest_first(alice: openai.OpenAI) -> None:
    ids = [alice.files.create(file=(f"p{n}.csv", CSV), purpose="assistants").id for n in range(3)]
    page = alice.files.list(limit=2, purpose="assistants")
    assert [f.id for f in page.data] == ids[::-1][:2] and page.has_more
    rest = alice.files.list(limit=2, purpose="assistants", after=page.data[-1].id)
    assert [f.id for f in rest.data] == [ids[0]] and not rest.has_more
    assert [f.id for f in alice.files.list(purpose="assistants", order="asc")] == ids


def test_an_unsupported_file_type_or_purpose_is_refused(alice: openai.OpenAI) -> None:
    with pytest.raises(openai.APIStatusError) as refused:
        alice.files.create(file=("tool.exe", b"MZ"), purpose="user_data")
    assert refused.value.status_code == 415
    with pytest.raises(openai.BadRequestError):
        alice.files.create(file=("a.csv", CSV), purpose="nonsense")  # type: ignore[arg-type]


def test_a_container_holds_its_files_and_the_users_copies(alice: openai.OpenAI) -> None:
    data = alice.files.create(file=("data.csv", CSV), purpose="user_data")
    container = alice.containers.create(name="analysis", file_ids=[data.id])
    assert container.id.startswith("cntr_") and container.status == "running"
    assert container.expires_after is not None and container.expires_after.minutes == 20
    files = alice.containers.files.list(container.id).data
    assert [(f.path, f.source, f.bytes) for f in files] == [
        ("/workspace/uploads/data.csv", "user", len(CSV))
    ]
    uploaded = alice.containers.files.create(container.id, file=("more.csv", b"a\n1\n"))
    assert uploaded.path == "/workspace/uploads/more.csv" and uploaded.object == "container.file"
    other = alice.files.create(file=("other.json", b"{}"), purpose="user_data")
    copied = alice.containers.files.create(container.id, file_id=other.id)
    assert copied.path == "/workspace/uploads/other.json" and copied.bytes == 2
    retrieved = alice.containers.files.retrieve(files[0].id, container_id=container.id)
    assert retrieved.path == files[0].path
    body = alice.containers.files.content.retrieve(files[0].id, container_id=container.id)
    assert body.read() == CSV
    alice.containers.files.delete(uploaded.id, container_id=container.id)
    paths = {f.path for f in alice.containers.files.list(container.id)}
    assert paths == {"/workspace/uploads/data.csv", "/workspace/uploads/other.json"}
    assert container.id in [c.id for c in alice.containers.list()]
    assert [c.id for c in alice.containers.list(name="analysis")] == [container.id]


def test_deleting_a_container_keeps_its_conversation(
    alice: openai.OpenAI, server: LiveServer
) -> None:
    container = alice.containers.create(name="to delete")
    alice.containers.delete(container.id)  # the SDK returns nothing
    with pytest.raises(openai.NotFoundError):
        alice.containers.retrieve(container.id)
    with pytest.raises(openai.NotFoundError):
        alice.containers.files.list(container.id)
    with server.client(server.token("alice", PASSWORD)) as http:
        titles = [c["title"] for c in http.get("/api/conversations").json()]
    assert "to delete" in titles


def test_another_users_files_and_containers_are_not_found(
    alice: openai.OpenAI, mallory: openai.OpenAI, server: LiveServer
) -> None:
    secret = alice.files.create(file=("secret.csv", CSV), purpose="user_data")
    container = alice.containers.create(name="private", file_ids=[secret.id])
    listed = alice.containers.files.list(container.id).data[0]
    for attempt in (
        lambda: mallory.files.retrieve(secret.id),
        lambda: mallory.files.content(secret.id),
        lambda: mallory.files.delete(secret.id),
        lambda: mallory.containers.create(name="steal", file_ids=[secret.id]),
        lambda: mallory.containers.retrieve(container.id),
        lambda: mallory.containers.delete(container.id),
        lambda: mallory.containers.files.list(container.id),
        lambda: mallory.containers.files.retrieve(listed.id, container_id=container.id),
        lambda: mallory.containers.files.content.retrieve(listed.id, container_id=container.id),
    ):
        with pytest.raises(openai.NotFoundError):
            attempt()
    mine = mallory.containers.create(name="mine")
    with pytest.raises(openai.NotFoundError):
        mallory.containers.files.create(mine.id, file_id=secret.id)
    assert secret.id not in [f.id for f in mallory.files.list()]
    assert container.id not in [c.id for c in mallory.containers.list()]
    # Traversal and made-up ids, sent raw (the SDK would escape them).
    headers = {"Authorization": f"Bearer {mallory.api_key}"}
    with httpx.Client(base_url=server.url, headers=headers) as http:
        for path in (
            "/v1/files/..%2F..%2Fapp.db/content",
            "/v1/files/file-00000000000000000000000000000000",
            f"/v1/containers/{container.id}%2F..%2F..",
            "/v1/containers/..%2Fu1-x/files",
            f"/v1/containers/{mine.id}/files/..%2F..%2Fapp.db/content",
        ):
            response = http.get(path)
            assert response.status_code == 404, (path, response.text)
            assert response.json()["error"]["message"]
    assert alice.files.content(secret.id).read() == CSV  # untouched


def test_an_expired_container_says_so(alice: openai.OpenAI, server: LiveServer) -> None:
    container = alice.containers.create(
        name="short", expires_after={"anchor": "last_active_at", "minutes": 1}
    )
    assert container.expires_after is not None and container.expires_after.minutes == 1
    alice.containers.files.list(container.id)  # running
    _last_active(server, container.id, minutes_ago=2)  # as if two minutes went by
    assert alice.containers.retrieve(container.id).status == "expired"
    with pytest.raises(openai.BadRequestError) as refused:
        alice.containers.files.list(container.id)
    error: Any = refused.value.body
    assert refused.value.code == "container_expired"
    assert "expired" in error["message"] and "1 minutes" in error["message"]
    with pytest.raises(openai.BadRequestError) as again:
        alice.containers.files.create(container.id, file=("x.csv", CSV))
    assert again.value.code == "container_expired"


def _last_active(server: LiveServer, container_id: str, minutes_ago: float) -> None:
    with sqlite3.connect(server.data_dir / "app.db") as db:
        db.execute(
            "UPDATE containers SET last_active_at = last_active_at - ? WHERE id = ?",
            (minutes_ago * 60, container_id),
        )


def test_deleting_a_user_deletes_their_files_and_containers(server: LiveServer) -> None:
    doomed = sdk_client(server, "doomed")
    kept = doomed.files.create(file=("gone.csv", CSV), purpose="user_data")
    container = doomed.containers.create(name="gone", file_ids=[kept.id])
    with server.client() as admin:
        user_id = next(u["id"] for u in admin.get("/api/users").json() if u["username"] == "doomed")
        folder = server.data_dir / "openai-files" / f"u{user_id}-files"
        assert (folder / kept.id).read_bytes() == CSV
        assert admin.delete(f"/api/users/{user_id}").status_code == 204
    assert not folder.exists()
    assert not (server.data_dir / "scratch" / f"u{user_id}-{container.id}").exists()
    with sqlite3.connect(server.data_dir / "app.db") as db:
        assert db.execute(
            "SELECT count(*) FROM openai_files WHERE user_id = ?", (user_id,)
        ).fetchone() == (0,)
        assert db.execute(
            "SELECT count(*) FROM containers WHERE user_id = ?", (user_id,)
        ).fetchone() == (0,)
