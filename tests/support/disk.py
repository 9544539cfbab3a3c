"""What files really take on disk, for tests of copies that must keep links and holes."""

from __future__ import annotations

from pathlib import Path


def allocated(folder: Path) -> int:
    """Bytes the files under `folder` take on disk, each inode once."""
    inodes = {}
    for path in folder.rglob("*"):
        info = path.lstat()
        if path.is_file() and not path.is_symlink():
            inodes[(info.st_dev, info.st_ino)] = info.st_blocks * 512
    return sum(inodes.values())
