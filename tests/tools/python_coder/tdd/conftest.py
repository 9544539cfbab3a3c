"""Fixtures for the TDD mode: a real sandbox (the scripted model is tests/support's)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.storage.workspaces import Workspaces
from backend.tools.sandbox.availability import SandboxStatus
from backend.tools.sandbox.executor import ExecutorLimits, SandboxedExecutor

LIMITS = ExecutorLimits(timeout=10, max_memory_mb=1024, max_file_mb=20)


@pytest.fixture
async def executor(tmp_path: Path) -> AsyncIterator[SandboxedExecutor]:
    workspace = Workspaces(tmp_path / "workspaces").ensure("u1-session")
    async with SandboxedExecutor(workspace, LIMITS, SandboxStatus("bwrap", "test")) as running:
        yield running
