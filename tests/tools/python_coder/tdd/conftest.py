"""Fixtures for the TDD mode: a real sandbox and a scripted model that records prompts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from pydantic import Field

from backend.core.llm import LLMBackend
from backend.core.llm.scripted import ScriptedChatModel
from backend.storage.workspaces import Workspaces
from backend.tools.python_coder.llm import CoderLLM
from backend.tools.sandbox.availability import SandboxStatus
from backend.tools.sandbox.executor import ExecutorLimits, SandboxedExecutor

LIMITS = ExecutorLimits(timeout=10, max_memory_mb=1024, max_file_mb=20)


class RecordingModel(ScriptedChatModel):
    """The scripted model, keeping every prompt it was sent."""

    prompts: list[str] = Field(default_factory=list)

    def _next_reply(self, messages: list[BaseMessage]) -> dict[str, Any]:
        self.prompts.append(str(messages[-1].content))
        return super()._next_reply(messages)


class _Backend(LLMBackend):
    name = "scripted"

    def __init__(self, model: BaseChatModel) -> None:
        super().__init__("scripted", "tests")
        self._model = model

    async def list_models(self) -> list[str]:
        return [self.default_model]

    def chat_model(self, model: str) -> BaseChatModel:
        return self._model


def scripted_llm(replies: list[Any]) -> tuple[CoderLLM, RecordingModel]:
    model = RecordingModel(replies=replies)
    return CoderLLM(backend=_Backend(model), model=model, model_name="scripted"), model


@pytest.fixture
async def executor(tmp_path: Path) -> AsyncIterator[SandboxedExecutor]:
    workspace = Workspaces(tmp_path / "workspaces").ensure("u1-session")
    async with SandboxedExecutor(workspace, LIMITS, SandboxStatus("bwrap", "test")) as running:
        yield running
