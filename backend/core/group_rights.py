"""What a user's groups let them use: which models, and which MCP servers.

A group's list bounds its members; the lists of a user's groups add up (the most generous
decides), and `*` in a model list stands for every model. A group with no list (null) has
no say, so a user none of whose groups has a list may use everything. Groups are read at
each request, so a membership an admin or a sign-in ends counts at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from fastapi.concurrency import run_in_threadpool

from backend.llm import LLMBackend
from backend.storage import Group, Store, User

LATEST = ":latest"  # Ollama's tag for a model named without one
EVERY_MODEL = "*"
T = TypeVar("T")


@dataclass(frozen=True)
class Rights:
    models: frozenset[str] | None  # None: every model
    mcp_server_ids: frozenset[int] | None  # None: every MCP server open to them

    def may_use_model(self, name: str) -> bool:
        if self.models is None:
            return True
        return name in self.models or name.removesuffix(LATEST) in self.models

    def may_use_mcp_server(self, server_id: int) -> bool:
        return self.mcp_server_ids is None or server_id in self.mcp_server_ids


class ModelNotAllowed(Exception):
    """The user's groups do not give them this model (or none that the backend has)."""

    def __init__(self, model: str) -> None:
        super().__init__(model)
        self.model = model


def rights_of(groups: Sequence[Group]) -> Rights:
    models = _union([group.models for group in groups])
    if models is not None:
        models = (
            None if EVERY_MODEL in models else frozenset(m.removesuffix(LATEST) for m in models)
        )
    return Rights(models, _union([group.mcp_server_ids for group in groups]))


def _union(lists: Sequence[Sequence[T] | None]) -> frozenset[T] | None:
    """What the lists name together; None when none of them is a list (no bound)."""
    given = [items for items in lists if items is not None]
    return None if not given else frozenset(item for items in given for item in items)


class GroupRights:
    """A user's rights from their groups, and the models they may use (`model_for`)."""

    def __init__(self, store: Store, llm: LLMBackend) -> None:
        self.store = store
        self.llm = llm

    async def of(self, user: User) -> Rights:
        return rights_of(await run_in_threadpool(self.store.groups_of, user.id))

    async def models(self, user: User, rights: Rights | None = None) -> list[str]:
        """The backend's models that `user` may use, in the backend's order."""
        rights = rights or await self.of(user)
        return [name for name in await self.llm.list_models() if rights.may_use_model(name)]

    async def model_for(self, user: User, requested: str | None) -> str:
        """The backend's name for the model `user` asked for (else the server's default if
        they may use it, else the first they may): the backend's `LLMError` (404) if it has
        none such, `ModelNotAllowed` (403) if their groups do not give it to them."""
        rights = await self.of(user)
        chosen = requested or self.llm.default_model
        if not requested and rights.models is not None and not rights.may_use_model(chosen):
            allowed = await self.models(user, rights)
            if not allowed:
                raise ModelNotAllowed(chosen)
            chosen = allowed[0]
        name = await self.llm.resolve_model(chosen)
        if not (rights.may_use_model(name) or rights.may_use_model(chosen)):
            raise ModelNotAllowed(chosen)
        return name
