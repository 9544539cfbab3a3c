"""Issue 40, finding 2: a turn snapshot, and a restore, write what the workspace really
holds (hard links as links, holes as holes), counted before a byte is written."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from backend.core.disk_usage import DiskUsage
from backend.storage.snapshots import NoRoom, TurnSnapshots
from backend.storage.workspaces import Workspaces
from tests.support.disk import allocated

KEY = "u1-0123456789abcdef"
MB = 1024 * 1024
LINKS = 50
SPARSE = 400 * MB


@dataclass
class Session:
    snapshots: TurnSnapshots
    workspace: Path
    key: str = KEY

    def turn(self, message_id: int) -> Path:
        return self.snapshots.folder(self.key) / str(message_id)


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    workspaces = Workspaces(tmp_path / "data")
    yield Session(TurnSnapshots(tmp_path / "data", workspaces), workspaces.ensure(KEY))


def contents(workspace: Path) -> dict[str, str]:
    """Each .bin file's checksum, by relative path (a file read once, however many names)."""
    by_inode: dict[int, str] = {}
    found = {}
    for path in sorted(workspace.rglob("*.bin")):
        inode = path.stat().st_ino
        if inode not in by_inode:
            with open(path, "rb") as handle:
                by_inode[inode] = hashlib.file_digest(handle, "sha256").hexdigest()
        found[str(path.relative_to(workspace))] = by_inode[inode]
    return found


def links_and_a_hole(workspace: Path) -> None:
    """4 MB of data under 50 names, and a 400 MB file that holds one 4 KB block."""
    (workspace / "outputs/copies").mkdir(parents=True)
    data = workspace / "variables/data.bin"
    data.write_bytes(os.urandom(4 * MB))
    for number in range(1, LINKS):
        os.link(data, workspace / f"outputs/copies/{number}.bin")
    with open(workspace / "outputs/sparse.bin", "wb") as handle:
        handle.truncate(SPARSE)
        handle.seek(SPARSE // 2)
        handle.write(b"x" * 4096)


def test_links_stay_links_and_holes_stay_holes(session: Session) -> None:
    links_and_a_hole(session.workspace)
    expected = contents(session.workspace)
    apparent = 4 * MB * LINKS + SPARSE
    assert allocated(session.workspace) < 5 * MB  # what the user really has

    cost = session.snapshots.take(session.key, 1)

    kept = session.turn(1) / "files"
    assert allocated(kept) < 5 * MB, f"{allocated(kept)} bytes for {apparent} apparent"
    # the 50 names, the sparse file and the workspace's notepad
    assert (cost.files, cost.copied, cost.hard_links) == (LINKS + 2, 3, LINKS - 1)
    assert cost.written < 5 * MB
    assert (kept / "variables/data.bin").stat().st_nlink == LINKS
    assert (kept / "outputs/sparse.bin").stat().st_size == SPARSE
    assert contents(kept) == expected

    # A run replaces everything: the restore puts the same files back, as sparse and as
    # linked as they were.
    for path in list(session.workspace.rglob("*.bin")):
        path.unlink()
    (session.workspace / "variables/data.bin").write_bytes(b"other")
    session.snapshots.restore(session.key, 1)

    assert contents(session.workspace) == expected
    assert allocated(session.workspace) < 5 * MB
    data = session.workspace / "variables/data.bin"
    assert data.stat().st_nlink == LINKS
    assert (session.workspace / "outputs/copies/7.bin").stat().st_ino == data.stat().st_ino
    # and the state it restored snapshots as links to itself: nothing copied again
    again = session.snapshots.take(session.key, 2)
    assert again.copied == 0 and again.written == 0


def test_a_snapshot_past_the_quota_is_refused_before_a_byte_is_written(
    session: Session,
) -> None:
    (session.workspace / "variables/big.bin").write_bytes(os.urandom(3 * MB))
    root = session.snapshots.folder(session.key)

    with pytest.raises(NoRoom) as refused:
        session.snapshots.take(session.key, 1, budget=2 * MB)

    assert refused.value.bound == "quota"
    assert refused.value.needed >= 3 * MB and refused.value.left == 2 * MB
    assert not root.exists() or list(root.iterdir()) == []  # not even a folder left
    assert not session.snapshots.has(session.key, 1)
    assert session.snapshots.head(session.key) is None

    # A sparse file's hole costs nothing, so the same quota holds a much larger one.
    (session.workspace / "variables/big.bin").unlink()
    with open(session.workspace / "variables/hole.bin", "wb") as handle:
        handle.truncate(SPARSE)
    assert session.snapshots.take(session.key, 1, budget=2 * MB).written <= 4096  # the notepad
    assert session.snapshots.has(session.key, 1)


def test_a_restore_past_the_quota_changes_nothing(session: Session) -> None:
    (session.workspace / "variables/big.bin").write_bytes(os.urandom(3 * MB))
    session.snapshots.take(session.key, 1)
    (session.workspace / "variables/big.bin").unlink()
    (session.workspace / "variables/small.json").write_text("{}")
    session.snapshots.take(session.key, 2)

    with pytest.raises(NoRoom) as refused:
        session.snapshots.restore(session.key, 1, budget=MB)

    assert refused.value.bound == "quota"
    assert (session.workspace / "variables/small.json").read_text() == "{}"
    assert not (session.workspace / "variables/big.bin").exists()
    assert session.snapshots.head(session.key) == 2
    # What the restore deletes counts for it: a quota that holds the difference is enough.
    (session.workspace / "variables/small.json").write_bytes(os.urandom(2 * MB))
    session.snapshots.restore(session.key, 1, budget=2 * MB)
    assert (session.workspace / "variables/big.bin").stat().st_size == 3 * MB


def test_disk_usage_counts_blocks_once_per_file(tmp_path: Path) -> None:
    """The quota sees what a user holds: a hole costs nothing, a hard link nothing more."""
    workspaces = Workspaces(tmp_path / "data")
    workspace = workspaces.ensure(KEY)
    links_and_a_hole(workspace)
    used = DiskUsage(workspaces.root).used(1)
    assert 4 * MB <= used < 5 * MB
