"""A turn's LLM client on the scripted chat model, recording every prompt it is sent.

For tests that drive a graph, the router or python_coder in process and need exact
replies (`ScriptedChatModel`'s `{"when": …, "content": …}` entries).
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from pydantic import Field

from backend.llm import LLMBackend
from backend.llm.scripted import ScriptedChatModel
from backend.llm.turn import TurnLLM


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


def scripted_llm(replies: list[Any]) -> tuple[TurnLLM, RecordingModel]:
    model = RecordingModel(replies=replies)
    return TurnLLM(backend=_Backend(model), model=model, model_name="scripted"), model
