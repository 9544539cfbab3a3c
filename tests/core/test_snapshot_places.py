"""Snapshots and restores take the governor's `snapshot` place (issue 40): copying a
session's files is bounded per user and in all; a snapshot that cannot get one is
skipped and the answer says so, never waited on without end."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

from backend.config import load_settings
from backend.core.branches import BranchStates
from backend.core.disk_shares import DiskShares
from backend.core.disk_usage import DiskUsage
from backend.core.governor import Governor
from backend.storage.shared import SharedWorkspaces
from backend.storage.snapshots import TurnSnapshots
from backend.storage.workspaces import Workspaces

KEY, OTHER = "u1-snap", "u2-snap"


def _branches(tmp_path: Path) -> tuple[BranchStates, Governor, TurnSnapshots]:
    share = {"total": 2, "per_user": 1, "seconds": 600}
    settings = load_settings(WORK_LIMITS={"snapshot": share}, WORK_WAIT_SECONDS=0.2)
    governor = Governor(settings)
    workspaces = Workspaces(tmp_path)
    for key in (KEY, OTHER):
        (workspaces.ensure(key) / "outputs").mkdir(exist_ok=True)
        (workspaces.ensure(key) / "outputs" / "a.txt").write_text("kept")
    snapshots = TurnSnapshots(tmp_path, workspaces)
    no_executors = cast("Any", None)  # only a restore stops a sandbox
    room = DiskShares(DiskUsage(workspaces.root), lambda user_id: 10**9).writing
    states = BranchStates(
        snapshots, no_executors, SharedWorkspaces(workspaces, None), room, governor
    )
    return states, governor, snapshots


async def test_a_snapshot_waits_for_a_place_and_says_when_it_gets_none(tmp_path: Path) -> None:
    states, governor, snapshots = _branches(tmp_path)
    async with governor.hold("snapshot", 1):  # the user's one place is taken
        note = await states.keep(KEY, 7)
        assert note is not None and note.startswith("This branch's data state was not kept:")
        assert "data snapshots and restores" in note
        assert not snapshots.has(KEY, 7)
        assert await states.keep(OTHER, 8) is None  # another user's is taken meanwhile
        assert snapshots.has(OTHER, 8)
    assert governor.held("snapshot", 1) == 0
    assert await states.keep(KEY, 7) is None and snapshots.has(KEY, 7)
