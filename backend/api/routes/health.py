"""What the server runs: liveness for anyone, the details for admins, the UI's part for users.

Anonymous `/health` says only that the server is up: the details name the data
directory, the database's user and host, the Ray cluster and the bucket, which are
no one else's business. `/api/status` gives a signed-in user what the UI shows.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from backend.api.deps import (
    BearerUser,
    CurrentUser,
    LLMDep,
    SandboxCheckDep,
    SandboxDep,
    SettingsDep,
)
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.config import Settings
from backend.storage import describe_database
from backend.storage.workspaces import SUPPORTED_EXTENSIONS
from backend.tools.sandbox import SandboxStatus
from backend.tools.sandbox.availability import NO_CGROUP
from backend.tools.sandbox.self_check import SandboxSelfCheck

router = APIRouter(tags=["health"])


@router.get("/health")
async def read_health(
    settings: SettingsDep,
    llm: LLMDep,
    sandbox: SandboxDep,
    check: SandboxCheckDep,
    request: Request,
) -> dict[str, Any]:
    """Report that the server is up. With an admin's bearer token, also the database,
    where code runs, the LLM backend and model, the sandbox isolation and upload limits."""
    if not await _is_admin(request):
        return {"status": "ok"}
    executor: dict[str, Any] = {"backend": settings.EXECUTOR_BACKEND}
    if settings.EXECUTOR_BACKEND == "ray":
        executor.update(ray_address=settings.RAY_ADDRESS, workspaces=settings.WORKSPACE_BUCKET)
    return {
        "status": "ok",
        "database": describe_database(settings.DATABASE_URL, settings.DATA_DIR),
        "executor": executor,
        "llm": {"backend": llm.name, "model": llm.default_model, "reason": llm.reason},
        "sandbox": _sandbox(sandbox, check),
        "upload": _upload_limits(settings),
    }


@router.get("/api/status", responses=CLIENT_ERRORS)
async def read_status(
    settings: SettingsDep,
    llm: LLMDep,
    sandbox: SandboxDep,
    check: SandboxCheckDep,
    user: CurrentUser,
) -> dict[str, Any]:
    """The LLM backend and model, the sandbox isolation and whether a sandbox runs code
    here, and the upload limits: what the UI's status line shows and what an upload may
    be (no paths, hosts or buckets)."""
    model = llm.default_model
    known = await llm.abilities_if_known(model) if model else None
    return {
        # The default model's profile: null until it is probed at its first use.
        "llm": {"backend": llm.name, "model": model, "profile": known and known.public()},
        "sandbox": _sandbox(sandbox, check),
        "upload": _upload_limits(settings),
    }


_bearer = BearerUser()


async def _is_admin(request: Request) -> bool:
    """Whether the request carries an admin's valid bearer token; any other is anonymous,
    so a probe with a stale token still learns that the server is up."""
    try:
        user = await _bearer(request)
    except ApiError:
        return False
    return user.is_admin


def _sandbox(sandbox: SandboxStatus, check: SandboxSelfCheck) -> dict[str, Any]:
    body: dict[str, Any] = {
        "mode": sandbox.mode,
        "isolated": sandbox.isolated,
        "detail": sandbox.detail,
        # The start-up self-check: checking, ok, broken (with the reason) or skipped.
        "state": check.state,
        "reason": check.reason,
    }
    if sandbox.isolated:
        # What bounds a run's memory: a cgroup lets DuckDB map memory and spill to disk.
        body["memory_bound"] = "cgroup" if sandbox.memory_cgroup else "rlimit"
        if not sandbox.memory_cgroup:
            body["warning"] = NO_CGROUP
    else:
        body["warning"] = sandbox.detail
    return body


def _upload_limits(settings: Settings) -> dict[str, Any]:
    """What an upload may be, so a client can refuse a file before sending it."""
    return {
        "max_file_mb": settings.PYTHON_CODE_MAX_FILE_SIZE,  # POST /api/upload
        "max_upload_mb": settings.MAX_UPLOAD_SIZE_MB,  # tus and PUT
        "extensions": sorted(SUPPORTED_EXTENSIONS),
    }
