"""Turn snapshots: a turn costs what it changed, snapshots never change afterwards, restore
puts a state back without following what a run planted, and keys are checked."""

from __future__ import annotations

import json
import os
import resource
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from backend.storage import snapshots as snapshots_module
from backend.storage.sessions import InvalidSession
from backend.storage.snapshots import TooManyFiles, TurnSnapshots, open_kept
from backend.storage.workspaces import NotARegularFile, UnsafePath, Workspaces

KEY = "u1-0123456789abcdef"


@dataclass
class Session:
    snapshots: TurnSnapshots
    workspace: Path
    key: str = KEY

    def files(self, message_id: int) -> Path:
        return self.snapshots.folder(self.key) / str(message_id) / "files"

    def write(self, relative: str, data: bytes | str) -> Path:
        path = self.workspace / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            data = data.encode()
        path.write_bytes(data)
        return path

    def state(self) -> dict[str, bytes]:
        """Every regular file of the workspace but uploads/, by relative path."""
        return {
            str(path.relative_to(self.workspace)): path.read_bytes()
            for path in sorted(self.workspace.rglob("*"))
            if path.is_file()
            and not path.is_symlink()
            and path.relative_to(self.workspace).parts[0] != "uploads"
        }


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    workspaces = Workspaces(tmp_path / "data")
    yield Session(TurnSnapshots(tmp_path / "data", workspaces), workspaces.ensure(KEY))


def first_turn(session: Session) -> None:
    """A realistic state: a big variable, a small one, a plot and a notepad entry."""
    session.write("variables/frame.parquet", os.urandom(2 * 1024 * 1024))
    session.write("variables/x.json", json.dumps({"x": 1}))
    session.write("outputs/plot1.png", os.urandom(20_000))
    session.write("notepad.json", json.dumps({"entries": ["x is 1"]}))


def test_a_turn_that_changed_nothing_big_costs_links_not_copies(session: Session) -> None:
    first_turn(session)
    first = session.snapshots.take(session.key, 1)
    assert (first.files, first.linked, first.copied) == (4, 0, 4)
    assert session.snapshots.head(session.key) == 1

    session.write("variables/x.json", json.dumps({"x": 22}))  # another size: another mark
    session.write("outputs/plot2.png", os.urandom(30_000))
    second = session.snapshots.take(session.key, 2)

    assert (second.files, second.linked, second.copied) == (5, 3, 2)
    assert second.copied_bytes == len(json.dumps({"x": 22})) + 30_000
    big = "variables/frame.parquet"
    assert (session.files(2) / big).stat().st_ino == (session.files(1) / big).stat().st_ino
    assert (session.files(2) / big).stat().st_nlink == 2
    assert (session.files(2) / "variables/x.json").read_text() == '{"x": 22}'
    assert (session.files(1) / "variables/x.json").read_text() == '{"x": 1}'
    assert session.snapshots.head(session.key) == 2


def test_a_snapshot_never_shares_an_inode_with_the_live_workspace(session: Session) -> None:
    first_turn(session)
    session.snapshots.take(session.key, 1)
    original = (session.files(1) / "variables/frame.parquet").read_bytes()
    session.write("variables/x.json", json.dumps({"x": 333}))
    session.snapshots.take(session.key, 2)

    live_inodes = {p.stat().st_ino for p in session.workspace.rglob("*") if p.is_file()}
    for message_id in (1, 2):
        kept = {p.stat().st_ino for p in session.files(message_id).rglob("*") if p.is_file()}
        assert kept and not kept & live_inodes

    # A run rewrites files in place, as numpy's memmap or an 'r+b' handle does.
    for relative in ("variables/frame.parquet", "variables/x.json"):
        with open(session.workspace / relative, "r+b") as handle:
            handle.write(b"OVERWRITTEN")
    assert (session.files(1) / "variables/frame.parquet").read_bytes() == original
    assert (session.files(2) / "variables/frame.parquet").read_bytes() == original
    assert (session.files(2) / "variables/x.json").read_text() == '{"x": 333}'

    third = session.snapshots.take(session.key, 3)  # the rewritten files have new mtimes
    assert third.copied == 2
    assert (session.files(3) / "variables/x.json").read_bytes().startswith(b"OVERWRITTEN")


def test_restore_brings_back_a_turns_state_and_keeps_uploads(session: Session) -> None:
    first_turn(session)
    session.snapshots.take(session.key, 1)
    after_first = session.state()
    session.write("uploads/data.csv", "a,b\n1,2\n")  # the user's, between the turns
    session.write("variables/x.json", json.dumps({"x": 2222}))
    session.write("variables/y.json", json.dumps({"y": 3}))
    session.write("outputs/more/plot2.png", os.urandom(10_000))
    session.write("notepad.json", json.dumps({"entries": ["x is 1", "x is 2222"]}))
    session.snapshots.take(session.key, 2)
    after_second = session.state()
    session.write("variables/z.json", "{}")  # a turn that was never snapshot

    session.snapshots.restore(session.key, 1)
    assert session.state() == after_first
    assert not (session.workspace / "outputs/more").exists()
    assert (session.workspace / "uploads/data.csv").read_text() == "a,b\n1,2\n"
    assert session.snapshots.head(session.key) == 1
    # Restored files carry their recorded marks: the next turn links them again.
    assert session.snapshots.take(session.key, 3).copied == 0

    session.snapshots.restore(session.key, 2)
    assert session.state() == after_second
    assert session.snapshots.head(session.key) == 2

    session.snapshots.restore(session.key, None)
    assert session.state() == {}
    assert sorted(p.name for p in session.workspace.iterdir()) == [
        "outputs",
        "scripts",
        "uploads",
        "variables",
    ]
    assert (session.workspace / "uploads/data.csv").read_text() == "a,b\n1,2\n"
    assert session.snapshots.head(session.key) is None


def test_links_and_fifos_a_run_planted_are_neither_followed_nor_copied(
    session: Session, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("SERVER SECRET")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "inner.txt").write_text("SERVER SECRET TOO")
    session.write("variables/x.json", "{}")
    (session.workspace / "variables/leak.json").symlink_to(secret)
    (session.workspace / "outputs/folder").symlink_to(outside, target_is_directory=True)
    os.mkfifo(session.workspace / "outputs/pipe")  # opening it to read would block

    cost = session.snapshots.take(session.key, 1)

    assert cost.files == 2  # x.json and notepad.json
    taken = list(session.files(1).rglob("*"))
    assert not any(p.is_symlink() for p in taken)
    assert {str(p.relative_to(session.files(1))) for p in taken if p.is_file()} == {
        "notepad.json",
        "variables/x.json",
    }
    manifest = json.loads((session.files(1).parent / "manifest.json").read_text())
    assert set(manifest) == {"notepad.json", "variables/x.json"}


def test_restore_writes_through_no_link_planted_where_it_writes(
    session: Session, tmp_path: Path
) -> None:
    session.write("variables/x.json", '{"x": 1}')
    session.write("outputs/charts/plot.png", b"PNG")
    session.snapshots.take(session.key, 1)
    victim = tmp_path / "victim.txt"
    victim.write_text("do not touch")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("kept")
    (session.workspace / "variables/x.json").unlink()
    (session.workspace / "variables/x.json").symlink_to(victim)  # where restore writes
    os.rename(session.workspace / "outputs", tmp_path / "real-outputs")
    (session.workspace / "outputs").symlink_to(outside, target_is_directory=True)

    session.snapshots.restore(session.key, 1)

    assert victim.read_text() == "do not touch"
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    x = session.workspace / "variables/x.json"
    assert not x.is_symlink() and x.read_text() == '{"x": 1}'
    outputs = session.workspace / "outputs"
    assert not outputs.is_symlink() and (outputs / "charts/plot.png").read_bytes() == b"PNG"


def test_more_than_max_files_is_refused_and_leaves_nothing(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    session.write("variables/x.json", "{}")
    session.snapshots.take(session.key, 1)
    monkeypatch.setattr(snapshots_module, "MAX_FILES", 5)
    for number in range(6):  # with notepad.json and x.json: 8 files
        session.write(f"outputs/{number}.txt", str(number))

    with pytest.raises(TooManyFiles):
        session.snapshots.take(session.key, 2)

    assert sorted(p.name for p in session.snapshots.folder(session.key).iterdir()) == [
        "1",
        "HEAD",
    ]
    assert session.snapshots.head(session.key) == 1
    # The run's clutter does not block a way back to a state it can hold.
    session.snapshots.restore(session.key, 1)
    assert set(session.state()) == {"notepad.json", "variables/x.json"}


def test_thousands_of_folders_do_not_take_a_descriptor_each(session: Session) -> None:
    for number in range(300):
        session.write(f"outputs/{number}/plot.png", b"PNG")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 64, hard))
    try:
        cost = session.snapshots.take(session.key, 1)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert cost.files == 301  # none skipped for want of a descriptor


def test_sessions_are_kept_apart_and_bad_keys_refused(tmp_path: Path) -> None:
    workspaces = Workspaces(tmp_path / "data")
    snapshots = TurnSnapshots(tmp_path / "data", workspaces)
    mine, theirs = "u1-mine", "u2-theirs"
    (workspaces.ensure(mine) / "variables/x.json").write_text("mine")
    (workspaces.ensure(theirs) / "variables/x.json").write_text("theirs")
    snapshots.take(mine, 1)
    snapshots.take(theirs, 1)
    assert snapshots.folder(mine) != snapshots.folder(theirs)
    assert (snapshots.folder(theirs) / "1/files/variables/x.json").read_text() == "theirs"

    snapshots.restore(mine, None)
    assert (workspaces.path(theirs) / "variables/x.json").read_text() == "theirs"
    assert snapshots.head(theirs) == 1 and snapshots.head(mine) is None

    for key in ("../x", "u1-..", "u1-../u2-theirs", "u1-a/../../scratch"):
        with pytest.raises(InvalidSession):
            snapshots.take(key, 1)
        with pytest.raises(InvalidSession):
            snapshots.restore(key, 1)
        with pytest.raises(InvalidSession):
            snapshots.has(key, 1)
    assert sorted(p.name for p in (tmp_path / "data/snapshots").iterdir()) == [mine, theirs]


def test_folders_nested_deeper_than_python_recurses_are_restored_away_and_removed(
    session: Session,
) -> None:
    """A run may nest 1,500 folders: restore and deleting the session still empty them
    (shutil.rmtree would die of recursion), and the link at the bottom is never followed."""
    outside = session.workspace.parent.parent / "outside.txt"
    outside.write_text("keep me")
    folder = os.open(session.workspace / "outputs", os.O_RDONLY)
    for _ in range(1500):
        os.mkdir("d", dir_fd=folder)
        inner = os.open("d", os.O_RDONLY, dir_fd=folder)
        os.close(folder)
        folder = inner
    os.symlink(outside, "link", dir_fd=folder)
    os.close(folder)
    session.write("uploads/sales.csv", "a,b\n")
    session.snapshots.take(session.key, 1)
    session.snapshots.restore(session.key, None)
    assert list((session.workspace / "outputs").iterdir()) == []
    assert (session.workspace / "uploads" / "sales.csv").exists()
    session.snapshots.workspaces.remove(session.key)
    assert not session.workspace.exists() and outside.read_text() == "keep me"


def test_an_output_rolled_out_by_a_restore_is_still_served_from_its_snapshot(
    session: Session,
) -> None:
    """Another branch's plot or table is shown from the snapshot that kept it; nothing
    but outputs/ is, and the live file wins when there is one."""
    session.write("outputs/plot_run1_1.png", b"branch one's plot")
    session.write("variables/x.json", "1")
    session.snapshots.take(session.key, 1)
    session.snapshots.restore(session.key, None)
    workspaces = session.snapshots.workspaces
    with open_kept(workspaces, session.key, "outputs/plot_run1_1.png") as handle:
        assert handle.read() == b"branch one's plot"
    with pytest.raises((FileNotFoundError, NotARegularFile)):
        open_kept(workspaces, session.key, "variables/x.json")
    with pytest.raises(FileNotFoundError):
        open_kept(workspaces, session.key, "outputs/never_made.png")
    with pytest.raises(UnsafePath):
        open_kept(workspaces, session.key, "outputs/../../u2-other/outputs/plot.png")
    session.write("outputs/plot_run1_1.png", b"live")
    with open_kept(workspaces, session.key, "outputs/plot_run1_1.png") as handle:
        assert handle.read() == b"live"
