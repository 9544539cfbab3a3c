"""Deleting a folder a run filled, however deep it nested it, never following a link.

shutil.rmtree recurses once per level and dies of RecursionError past ~1,000 levels,
which a run reaches with one loop: its session could then never be deleted. Here each
folder met is moved up into the one being emptied (a rename), so neither the stack nor
the open descriptors grow with depth.
"""

from __future__ import annotations

import contextlib
import os
import uuid

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def remove_tree(parent: int, name: str) -> None:
    """Delete the folder `name` in the open folder `parent` with all it holds."""
    try:
        top = os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        return
    try:
        while True:
            with os.scandir(top) as entries:
                listed = list(entries)
            folders = [entry.name for entry in listed if entry.is_dir(follow_symlinks=False)]
            for entry in listed:
                if entry.name not in folders:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.name, dir_fd=top)
            if not folders:
                break
            for folder in folders:
                inner = os.open(folder, _DIRECTORY_FLAGS, dir_fd=top)
                try:
                    with os.scandir(inner) as entries:
                        for entry in list(entries):
                            if entry.is_dir(follow_symlinks=False):
                                os.rename(
                                    entry.name,
                                    f".up-{uuid.uuid4().hex}",
                                    src_dir_fd=inner,
                                    dst_dir_fd=top,
                                )
                            else:
                                with contextlib.suppress(FileNotFoundError):
                                    os.unlink(entry.name, dir_fd=inner)
                finally:
                    os.close(inner)
                os.rmdir(folder, dir_fd=top)
    finally:
        os.close(top)
    os.rmdir(name, dir_fd=parent)
