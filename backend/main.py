"""Creates the FastAPI application."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from backend.api.errors import install_error_handlers
from backend.api.limits import BodySizeLimitMiddleware
from backend.api.main import ROUTERS
from backend.api.mcp_server import mount_mcp, serving
from backend.api.routes.tus import STREAMED_PATCH
from backend.api.routes.uploads import FORM_UPLOADS, STREAMED_UPLOAD
from backend.api.security_headers import SecurityHeadersMiddleware
from backend.api.ui import mount_ui
from backend.config import Settings, load_settings
from backend.core.services import build_services
from backend.tasks.reaper import expire_containers, reap_idle_workers


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings()
    services = build_services(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        reaper = asyncio.create_task(
            reap_idle_workers(services.executors, settings.SANDBOX_IDLE_SECONDS)
        )
        expiry = asyncio.create_task(expire_containers(services.containers))
        async with serving(mcp_sessions):
            yield
        reaper.cancel()
        expiry.cancel()
        await services.close()

    docs = settings.API_DOCS
    app = FastAPI(
        title="Python Data Agent",
        version="0.1.0",
        lifespan=lifespan,
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
        openapi_url="/openapi.json" if docs else None,
    )
    app.state.services = services
    upload_bytes = int(settings.PYTHON_CODE_MAX_FILE_SIZE * 1024 * 1024) + 1024 * 1024
    app.add_middleware(
        BodySizeLimitMiddleware,
        max_bytes=settings.max_request_bytes,
        overrides=((FORM_UPLOADS, max(upload_bytes, settings.max_request_bytes)),),
        # Capped by MAX_UPLOAD_SIZE_MB (or the upload's length) as they stream.
        streamed=(("PUT", STREAMED_UPLOAD), ("PATCH", STREAMED_PATCH)),
    )
    app.add_middleware(SecurityHeadersMiddleware)  # outermost: every response has them
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    mcp_sessions = mount_mcp(app, services)  # this server as an MCP server, at /mcp
    mount_ui(app)  # same origin as the API: no CORS needed
    return app
