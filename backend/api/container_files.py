"""A container's file, as OpenAI's Containers API names it: one that went from the
workspace (deleted, or now a link or a folder) is that container file not found (404),
not a bad path."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from backend.core.containers import ContainerFileNotFound
from backend.storage.workspaces import NotARegularFile, UnsafePath


@contextlib.contextmanager
def container_file(file_id: str) -> Iterator[None]:
    """The workspace's refusals of container file `file_id`'s path as `ContainerFileNotFound`."""
    try:
        yield
    except (UnsafePath, NotARegularFile, FileNotFoundError):
        raise ContainerFileNotFound(file_id) from None
