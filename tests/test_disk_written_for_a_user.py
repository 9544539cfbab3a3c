"""Issue 40, findings 2 and 5, the way a user and an operator meet them: a turn whose code
makes hard links and a sparse file is snapshot, backed up and restored at what it holds,
and a turn whose snapshot the user's quota cannot hold says so in its answer."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from tests.conftest import scripted_server
from tests.support.admin_cli import admin
from tests.support.agent_script import react_turn, sse_events
from tests.support.disk import allocated
from tests.support.waiting import wait_for

MB = 1024 * 1024
LINKS = 50
SESSION = "disk"
MAKE_LINKS = f"""from pathlib import Path
import numpy as np
Path("outputs/copies").mkdir(parents=True, exist_ok=True)
data = Path("outputs/data.bin")
data.write_bytes(np.random.default_rng().bytes(4 * 1024 * 1024))
for number in range(1, {LINKS}):
    Path(f"outputs/copies/{{number}}.bin").hardlink_to(data)
with open("outputs/sparse.bin", "wb") as handle:
    handle.truncate(400 * 1024 * 1024)
print("names", data.stat().st_nlink)
"""
WRITE_MORE = """from pathlib import Path
import numpy as np
Path("outputs/more.bin").write_bytes(np.random.default_rng().bytes(15 * 1024 * 1024))
print("wrote more")
"""


def digest(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def ask(http: Any, tag: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A streamed ReAct turn: its events by name, and its answer once it is recorded
    (after its snapshot)."""
    body = {"message": f"{tag}: run it", "session_id": SESSION, "stream": True}
    with http.stream("POST", "/api/chat", json={**body, "agent_type": "react"}) as reply:
        assert reply.status_code == 200, reply.read()
        events = dict(sse_events(reply.iter_lines()))
    listed = http.get("/api/conversations").json()
    url = f"/api/conversations/{next(c['id'] for c in listed if c['session_id'] == SESSION)}"
    answer: dict[str, Any] = {}

    def recorded() -> bool:
        answer.update(http.get(url).json()["messages"][-1])
        return bool(answer["metadata"].get("finish_reason") not in (None, "running"))

    wait_for(recorded)
    return events, answer


def test_links_and_holes_cost_what_they_hold_and_the_quota_is_counted_first(
    tmp_path: Path,
) -> None:
    review = {"when": "[stage: review]", "content": '{"answers_question": true}', "repeat": True}
    replies = [
        review,
        *react_turn("Q-LINKS", MAKE_LINKS, "Made."),
        *react_turn("Q-MORE", WRITE_MORE),
    ]
    settings = {"PYTHON_CODE_MAX_FILE_SIZE": "500", "USER_MAX_DISK_MB": "30"}
    (tmp_path / "live").mkdir()
    with scripted_server(tmp_path / "live", replies, **settings) as live:
        with live.client(timeout=180) as http:
            made, answer = ask(http, "Q-LINKS")
            assert made["execution"]["stdout"] == f"names {LINKS}\n", made["execution"]
            (workspace,) = (live.data_dir / "scratch").glob(f"*{SESSION}*")
            snapshots = live.data_dir / "snapshots" / workspace.name
            first = snapshots / str(answer["id"])
            wait_for(lambda: (first / "manifest.json").is_file())

            # 4 MB of data under 50 names and a 400 MB hole: the snapshot holds 4 MB.
            assert allocated(workspace) < 5 * MB
            assert allocated(first / "files") < 5 * MB, allocated(first / "files")
            kept = first / "files/outputs"
            assert (kept / "copies/7.bin").stat().st_ino == (kept / "data.bin").stat().st_ino
            assert (kept / "sparse.bin").stat().st_size == 400 * MB

            # 15 MB more fits in what the 30 MB quota leaves (8 MB are used), but its
            # snapshot's copy would not: the run is the user's, the snapshot is not taken,
            # and the answer says why.
            more, shown = ask(http, "Q-MORE")
            assert more["execution"]["stdout"] == "wrote more\n", more["execution"]
            note = shown["metadata"]["data_state"]
            assert "was not kept" in note and "disk quota (USER_MAX_DISK_MB)" in note, note
            assert sorted(p.name for p in snapshots.iterdir() if p.name.isdigit()) == [first.name]
            assert not [p for p in snapshots.iterdir() if p.name.endswith(".partial")]

        # Finding 5: the backup, taken from the serving server, and its restore.
        backup = admin("backup", str(tmp_path / "backup"), **live.env)
        assert backup.returncode == 0, backup.stderr
        expected = {
            name: digest(workspace / "outputs" / name) for name in ("data.bin", "sparse.bin")
        }

    copied = tmp_path / "backup/data"
    # the workspace (4 + 15 MB), the snapshot (4 MB) and small files; not 600 MB more
    assert allocated(copied) < 35 * MB, allocated(copied)
    in_backup = copied / "scratch" / workspace.name / "outputs"
    assert (in_backup / "sparse.bin").stat().st_blocks == 0
    assert (in_backup / "copies/3.bin").stat().st_ino == (in_backup / "data.bin").stat().st_ino

    restored = admin("restore", str(tmp_path / "backup"), DATA_DIR=str(tmp_path / "copy/data"))
    assert restored.returncode == 0, restored.stderr
    back = tmp_path / "copy/data/scratch" / workspace.name / "outputs"
    assert {name: digest(back / name) for name in expected} == expected
    assert (back / "sparse.bin").stat().st_size == 400 * MB
    assert (back / "sparse.bin").stat().st_blocks == 0
    assert (back / "data.bin").stat().st_nlink == LINKS
    assert allocated(tmp_path / "copy/data") < 35 * MB
