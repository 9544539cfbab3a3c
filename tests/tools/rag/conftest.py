"""Fixtures: a data directory with workspaces, one isolated helper, and indexes over them."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from backend.files.isolation import IsolatedRunner
from backend.llm.embedder import Embedder
from backend.storage.workspaces import Workspaces
from backend.tools.rag import RagIndex

Upload = Callable[[str, str, bytes | str], Path]
MakeIndex = Callable[..., RagIndex]


@pytest.fixture(scope="session")
def runner() -> Iterator[IsolatedRunner]:
    """One helper process for every test: spawning it is the slow part."""
    helper = IsolatedRunner(timeout=60)
    yield helper
    helper.close()


@pytest.fixture
def workspaces(tmp_path: Path) -> Workspaces:
    return Workspaces(tmp_path)


@pytest.fixture
def upload(workspaces: Workspaces) -> Upload:
    """Write `data` to the session's uploads/<name>; a rewrite gets a later mtime."""

    def write(session_id: str, name: str, data: bytes | str) -> Path:
        path = workspaces.ensure(session_id) / "uploads" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        before = path.stat().st_mtime_ns if existed else 0
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        if existed:  # coarse file-system clocks: make the change visible
            later = max(path.stat().st_mtime_ns, before + 1_000_000_000)
            os.utime(path, ns=(later, later))
        return path

    return write


@pytest.fixture
def make_index(tmp_path: Path, workspaces: Workspaces, runner: IsolatedRunner) -> MakeIndex:
    def make(embedder: Embedder | None = None, **options: float) -> RagIndex:
        return RagIndex(
            tmp_path, workspaces=workspaces, runner=runner, embedder=embedder, **options
        )

    return make


@pytest.fixture
def index(make_index: MakeIndex) -> RagIndex:
    return make_index()
