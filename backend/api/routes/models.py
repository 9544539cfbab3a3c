"""The models a user may pick, each with what it can do (`backend/llm/model_probe.py`).

A model's profile is known once an operator named it (MODEL_PROFILES) or it was probed
at its first use; until then it is `null`, and listing never probes (a probe is two
model calls, which a page load should not cost).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from backend.api.deps import CurrentUser, LLMDep, RightsDep
from backend.api.errors import CLIENT_ERRORS

router = APIRouter(prefix="/api", tags=["models"], responses=CLIENT_ERRORS)


@router.get("/models")
async def list_models(llm: LLMDep, rights: RightsDep, user: CurrentUser) -> dict[str, Any]:
    """The backend's models that your groups let you use, your default first, each with
    its profile when known."""
    names = await rights.models(user)
    default = llm.default_model if llm.default_model in names else (names[0] if names else "")
    ordered = sorted(names, key=lambda name: name != default)
    data = []
    for name in ordered:
        known = await llm.abilities_if_known(name)
        data.append({"id": name, "default": name == default, "profile": known and known.public()})
    return {"backend": llm.name, "data": data}
