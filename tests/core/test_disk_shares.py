"""A user's runs, and what the server writes for them, share what their quota leaves
(backend/core/disk_shares.py): each run's workspace gets a limit the sandbox reads, each
server-side writer a budget, and together they never pass the quota."""

from __future__ import annotations

from pathlib import Path

from backend.core.disk_shares import DiskShares
from backend.core.disk_usage import DiskUsage
from backend.storage.run_room import LIMIT_FILE, room_folder
from backend.storage.workspaces import Workspaces

MB = 1024 * 1024
QUOTA = 10 * MB


def _limit(workspace: Path) -> int | None:
    path = room_folder(workspace) / LIMIT_FILE
    return int(path.read_text()) if path.exists() else None


async def test_runs_and_the_servers_writing_share_what_is_left(tmp_path: Path) -> None:
    workspaces = Workspaces(tmp_path)
    one, two = workspaces.ensure("u1-one"), workspaces.ensure("u1-two")
    (one / "outputs" / "kept.bin").parent.mkdir(parents=True, exist_ok=True)
    (one / "outputs" / "kept.bin").write_bytes(b"x" * (2 * MB))
    shares = DiskShares(DiskUsage(workspaces.root), lambda user_id: QUOTA)
    used = DiskUsage(workspaces.root).used(1)
    left = QUOTA - used

    async with shares.held("u1-one", one):
        size_one = DiskUsage(workspaces.root).measure(1)[str(one)]
        assert _limit(one) == size_one + left  # alone: all that is left
        async with shares.held("u1-two", two):
            size_two = DiskUsage(workspaces.root).measure(1)[str(two)]
            assert _limit(one) == size_one + left // 2
            assert _limit(two) == size_two + left // 2
            async with shares.writing("u1-two") as budget:  # a snapshot meanwhile
                assert budget == left // 3
                assert _limit(one) == size_one + left // 3
                assert _limit(two) == size_two + left // 3
        assert _limit(two) is None  # its run ended: no limit left behind
    assert _limit(one) is None


async def test_another_users_runs_are_not_counted(tmp_path: Path) -> None:
    workspaces = Workspaces(tmp_path)
    mine, theirs = workspaces.ensure("u1-mine"), workspaces.ensure("u2-theirs")
    shares = DiskShares(DiskUsage(workspaces.root), lambda user_id: QUOTA)
    async with shares.held("u2-theirs", theirs), shares.writing("u1-mine") as budget:
        assert budget == QUOTA - DiskUsage(workspaces.root).used(1)
        assert _limit(mine) is None
