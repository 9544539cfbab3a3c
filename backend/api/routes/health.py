"""Liveness and configuration at a glance; no auth."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from backend.api.deps import ServicesDep
from backend.storage import describe_database
from backend.storage.workspaces import SUPPORTED_EXTENSIONS
from backend.tools.sandbox.availability import NO_CGROUP

router = APIRouter(tags=["health"])


@router.get("/health")
async def read_health(services: ServicesDep) -> dict[str, Any]:
    """Report status, the database, the LLM backend and model, where code runs, the
    sandbox isolation and upload limits."""
    llm, sandbox = services.llm, services.sandbox
    sandbox_body: dict[str, Any] = {
        "mode": sandbox.mode,
        "isolated": sandbox.isolated,
        "detail": sandbox.detail,
    }
    if sandbox.isolated:
        # What bounds a run's memory: a cgroup lets DuckDB map memory and spill to disk.
        sandbox_body["memory_bound"] = "cgroup" if sandbox.memory_cgroup else "rlimit"
        if not sandbox.memory_cgroup:
            sandbox_body["warning"] = NO_CGROUP
    else:
        sandbox_body["warning"] = sandbox.detail
    settings = services.settings
    executor: dict[str, Any] = {"backend": settings.EXECUTOR_BACKEND}
    if settings.EXECUTOR_BACKEND == "ray":
        executor.update(ray_address=settings.RAY_ADDRESS, workspaces=settings.WORKSPACE_BUCKET)
    return {
        "status": "ok",
        "database": describe_database(settings.DATABASE_URL, settings.DATA_DIR),
        "executor": executor,
        "llm": {"backend": llm.name, "model": llm.default_model, "reason": llm.reason},
        "sandbox": sandbox_body,
        # What an upload may be, so a client can refuse a file before sending it.
        "upload": {
            "max_file_mb": services.settings.PYTHON_CODE_MAX_FILE_SIZE,  # POST /api/upload
            "max_upload_mb": services.settings.MAX_UPLOAD_SIZE_MB,  # tus and PUT
            "extensions": sorted(SUPPORTED_EXTENSIONS),
        },
    }
