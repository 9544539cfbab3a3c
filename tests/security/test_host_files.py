"""What the server does on the host with a workspace that hostile code has shaped.

The sandbox can put symlinks, FIFOs and odd names into its workspace; the server reads,
lists and writes that same directory on the host, where a followed link is an escape.
"""

from __future__ import annotations

import http.client
import threading
import time
import uuid
from collections.abc import Callable

import httpx
import pytest

from tests.security.helpers import (
    Secrets,
    client,
    everything,
    run,
    stdout,
    workspace,
)
from tests.support.live_server import LiveServer

# id -> (code that plants the link, the path to download)
LinkPlant = Callable[[LiveServer], tuple[str, str]]
LINKS: dict[str, LinkPlant] = {
    "file_link_absolute": lambda s: (
        f"os.symlink({str(s.data_dir / 'secret_key')!r}, 'outputs/key.txt')",
        "outputs/key.txt",
    ),
    "file_link_relative": lambda s: (
        "os.symlink('../../../secret_key', 'outputs/key.txt')",
        "outputs/key.txt",
    ),
    "directory_link": lambda s: (
        f"os.symlink({str(s.data_dir)!r}, 'outputs/datadir')",
        "outputs/datadir/secret_key",
    ),
}


@pytest.mark.parametrize("plant", LINKS.values(), ids=LINKS.keys())
def test_download_refuses_symlinks(
    server: LiveServer, secrets: Secrets, sid: str, plant: LinkPlant
) -> None:
    code, path = plant(server)
    result = run(server, f"import os\n{code}\nprint('PLANTED')", sid)
    assert "PLANTED" in stdout(result), everything(result)[:2000]
    response = client(server).get(f"/api/sessions/{sid}/files/{path}", timeout=10)
    assert response.status_code == 404, (response.status_code, response.text[:300])
    assert secrets.secret_key not in response.text
    listing = client(server).get(f"/api/sessions/{sid}/files", timeout=10)
    assert listing.status_code == 200
    assert secrets.secret_key not in listing.text
    listed = [entry["path"] for entry in listing.json()]
    assert path not in listed
    assert not any(entry.endswith("secret_key") for entry in listed), listed


def test_download_of_fifo_does_not_hang(server: LiveServer, sid: str) -> None:
    result = run(server, "import os\nos.mkfifo('outputs/data.csv')\nprint('PLANTED')", sid)
    assert "PLANTED" in stdout(result), everything(result)[:2000]
    started = time.monotonic()
    try:
        response = client(server).get(f"/api/sessions/{sid}/files/outputs/data.csv", timeout=10)
        listing = client(server).get(f"/api/sessions/{sid}/files", timeout=10)
    except httpx.TimeoutException:
        pytest.fail("the server hung on a FIFO in the workspace")
    assert response.status_code == 404, (response.status_code, response.text[:300])
    assert listing.status_code == 200
    assert "outputs/data.csv" not in [entry["path"] for entry in listing.json()]
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("name", ["../evil.txt", "a/b.txt"])
def test_upload_refuses_path_names(server: LiveServer, sid: str, name: str) -> None:
    run(server, "print('ready')", sid)
    response = client(server).post(
        "/api/upload", data={"session_id": sid}, files={"file": (name, b"EVIL-UPLOAD")}
    )
    assert response.status_code == 400, (response.status_code, response.text[:300])
    root = workspace(server, sid)
    written = [
        path
        for base in (server.data_dir, root.parent, root, root / "uploads", root / "uploads" / "a")
        if base.is_dir()
        for path in base.iterdir()
        if path.is_file() and path.read_bytes() == b"EVIL-UPLOAD"
    ]
    assert written == []


@pytest.mark.parametrize(
    "raw",
    [
        "%2e%2e/%2e%2e/secret_key",
        "..%2f..%2fsecret_key",
    ],
)
def test_download_refuses_traversal(
    server: LiveServer, secrets: Secrets, sid: str, raw: str
) -> None:
    run(server, "print('ready')", sid)
    # http.client sends the path exactly as written: no client-side normalisation.
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(
            "GET",
            f"/api/sessions/{sid}/files/{raw}",
            headers={"Authorization": client(server).headers["Authorization"]},
        )
        response = connection.getresponse()
        body = response.read().decode(errors="replace")
    finally:
        connection.close()
    assert response.status in (400, 404), (response.status, body[:300])
    assert secrets.secret_key not in body
    assert "root:x:0:0" not in body


def _flip_notepad_code(canary: str, seconds: float | None) -> str:
    """Swap workspace/notepad.json between absent and a symlink to a host file, fast."""
    loop = "while True:" if seconds is None else "while time.monotonic() < end:"
    return (
        "import os, threading, time\n"
        f"end = time.monotonic() + {seconds or 0}\n"
        "def flip():\n"
        f"    {loop}\n"
        "        try:\n"
        f"            os.symlink({canary!r}, '/workspace/notepad.json')\n"
        "        except OSError:\n"
        "            pass\n"
        "        try:\n"
        "            os.unlink('/workspace/notepad.json')\n"
        "        except OSError:\n"
        "            pass\n"
    )


def test_leftover_thread_cannot_make_the_server_write_host_files(
    server: LiveServer, sid: str
) -> None:
    """A thread left running flips notepad.json into a symlink to a host file while the
    server prepares the workspace for the next requests: the host file must stay as it was."""
    canary = server.data_dir / f"rt-canary-{uuid.uuid4().hex[:8]}.txt"
    canary.write_text("ORIGINAL")
    code = (
        _flip_notepad_code(str(canary), None)
        + "threading.Thread(target=flip, daemon=True).start()\nprint('STARTED')\n"
    )
    try:
        result = run(server, code, sid)
        assert "STARTED" in stdout(result), everything(result)[:2000]
        # Uploads and failed runs both prepare the workspace; neither replaces the zygote
        # the thread lives in (a successful run would).
        for _ in range(100):
            client(server).post(
                "/api/upload", data={"session_id": sid}, files={"file": ("a.txt", b"hi")}
            )
            run(server, "raise SystemExit(1)", sid)
            if canary.read_text() != "ORIGINAL":
                break
        assert canary.read_text() == "ORIGINAL", (
            f"the server followed a sandbox-made symlink and overwrote a host file: "
            f"{canary} now holds {canary.read_text()!r}"
        )
    finally:
        run(server, "import os\nos.kill(-1, 9)\nos.kill(os.getpid(), 9)", sid)
        canary.unlink(missing_ok=True)


def test_concurrent_upload_cannot_be_raced_into_writing_host_files(
    server: LiveServer, sid: str
) -> None:
    """The same race from inside a running cell while the user uploads a file."""
    canary = server.data_dir / f"rt-canary-{uuid.uuid4().hex[:8]}.txt"
    canary.write_text("ORIGINAL")
    run(server, "print('ready')", sid)
    code = _flip_notepad_code(str(canary), 4.0) + "print('FLIPPING')\nflip()\n"
    outcome: dict[str, object] = {}
    runner = threading.Thread(
        target=lambda: outcome.update(result=run(server, code, sid, timeout=5))
    )
    try:
        runner.start()
        time.sleep(1.0)
        with server.client(limits=httpx.Limits(max_keepalive_connections=0)) as uploader:
            deadline = time.monotonic() + 2.5
            while time.monotonic() < deadline and canary.read_text() == "ORIGINAL":
                uploader.post(
                    "/api/upload", data={"session_id": sid}, files={"file": ("b.txt", b"hi")}
                )
        runner.join(30)
        assert canary.read_text() == "ORIGINAL", (
            f"an upload during a run followed a sandbox-made symlink: "
            f"{canary} now holds {canary.read_text()!r}"
        )
    finally:
        runner.join(30)
        canary.unlink(missing_ok=True)


def test_workspace_folder_replaced_by_dangling_symlink(server: LiveServer, sid: str) -> None:
    """Hostile code swaps uploads/ for a dangling link: the session must keep working."""
    result = run(
        server,
        "import os\nos.rename('uploads', 'uploads.old')\n"
        "os.symlink('/nonexistent-rt-target', 'uploads')\nprint('PLANTED')",
        sid,
    )
    assert "PLANTED" in stdout(result), everything(result)[:2000]
    assert not (workspace(server, sid) / "uploads").resolve().exists()
    follow_up = run(server, "print('still-works')", sid)  # asserts HTTP 200
    assert stdout(follow_up).strip() == "still-works", follow_up
