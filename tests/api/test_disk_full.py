"""A full disk (DATA_DIR on a small tmpfs): uploads are 507, nothing is corrupted, and what
was acknowledged stays (issue 12). Needs root to mount; skipped loudly otherwise."""

from __future__ import annotations

import errno
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ADMIN_PASSWORD, write_replies
from tests.support.live_server import LiveServer


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "data"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=48m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"SKIPPED: cannot mount a small tmpfs here (needs root): {mounted.stderr}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(path: Path) -> None:
    """Write to `path` until the disk refuses."""
    block = b"\0" * (1 << 20)
    with path.open("wb") as handle:
        try:
            while True:
                handle.write(block)
                handle.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def test_a_full_disk_refuses_cleanly_and_keeps_what_was_acknowledged(
    small_disk: Path, tmp_path: Path
) -> None:
    replies = write_replies(tmp_path / "r.json", [{"content": "Noted.", "repeat": True}])
    server = LiveServer(
        small_disk, LLM_BACKEND="scripted", SCRIPTED_REPLIES=replies, ADMIN_PASSWORD=ADMIN_PASSWORD
    )
    server.start()
    try:
        with server.client() as http:
            first = http.post("/api/chat", json={"message": "remember this", "session_id": "full"})
            assert first.status_code == 200, first.text
            # Under the 1 GB the server keeps free: refused before a byte is written.
            put = http.put("/api/sessions/full/uploads/a.csv", content=b"a,b\n1,2\n")
            assert put.status_code == 507, put.text
            filler = small_disk / "filler"
            fill(filler)
            form = http.post(
                "/api/upload", data={"session_id": "full"}, files={"file": ("b.csv", b"x,y\n" * 9)}
            )
            chat = http.post("/api/chat", json={"message": "and this", "session_id": "full"})
            for response in (form, chat):
                assert response.status_code in (200, 507), response.text
            assert form.status_code == 507 and "disk" in form.json()["detail"]
            filler.unlink()
            after = http.post("/api/chat", json={"message": "still here?", "session_id": "full"})
            assert after.status_code == 200, after.text
            conversation = http.get(f"/api/conversations/{first.json()['conversation_id']}").json()
        said = [m["content"] for m in conversation["messages"] if m["role"] == "user"]
        assert said[0] == "remember this" and said[-1] == "still here?"
    finally:
        server.stop()
    check = sqlite3.connect(small_disk / "app.db")
    assert check.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    check.close()
