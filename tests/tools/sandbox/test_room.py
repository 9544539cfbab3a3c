"""The sandbox's side of a run's disk share (backend/tools/sandbox/room.py): the workspace
measured against the server's limit, and more often as it nears it, where a fast writer
would pass it soonest."""

from __future__ import annotations

from pathlib import Path

from backend.tools.sandbox import room

MB = 1024 * 1024


def _room(tmp_path: Path, limit: int | None) -> tuple[room.Room, Path]:
    folder, workspace = tmp_path / "room", tmp_path / "workspace"
    folder.mkdir()
    workspace.mkdir()
    if limit is not None:
        (folder / room.LIMIT_FILE).write_text(str(limit))
    return room.Room(str(folder), str(workspace)), workspace


def test_a_run_far_from_its_limit_is_measured_every_tenth_of_a_second(tmp_path: Path) -> None:
    space, workspace = _room(tmp_path, 4 * room.NEAR)
    (workspace / "data.bin").write_bytes(b"x" * MB)
    assert not space.over()
    assert room.NEAR_INTERVAL < space.due_in() <= room.MIN_INTERVAL
    assert not space.over()  # not measured again before it is due


def test_a_run_near_its_limit_is_measured_every_ten_milliseconds(tmp_path: Path) -> None:
    space, workspace = _room(tmp_path, room.NEAR // 2)
    (workspace / "data.bin").write_bytes(b"x" * MB)
    assert not space.over()
    assert space.due_in() <= room.NEAR_INTERVAL


def test_a_workspace_past_its_limit_is_over_and_no_limit_is_no_bound(tmp_path: Path) -> None:
    space, workspace = _room(tmp_path, MB)
    (workspace / "data.bin").write_bytes(b"x" * (2 * MB))
    assert space.over(now=True)
    (tmp_path / "other").mkdir()
    unbounded, elsewhere = _room(tmp_path / "other", None)
    (elsewhere / "data.bin").write_bytes(b"x" * (2 * MB))
    assert not unbounded.over(now=True)
