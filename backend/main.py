"""Creates the FastAPI application."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.routing import Route
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from backend.api.errors import install_error_handlers
from backend.api.limits import BodySizeLimitMiddleware
from backend.api.main import ROUTERS
from backend.api.mcp_server import mount_mcp, serving
from backend.api.metrics import MetricsApp, allowed_networks, metrics_server
from backend.api.observe import ObserveMiddleware
from backend.api.routes.tus import STREAMED_PATCH
from backend.api.routes.uploads import FORM_UPLOADS, STREAMED_UPLOAD
from backend.api.security_headers import SecurityHeadersMiddleware
from backend.api.socket_peer import SocketPeerMiddleware
from backend.api.ui import mount_ui
from backend.config import Settings, load_settings
from backend.core.services import build_services
from backend.observability.metrics import Gauges, register_gauges
from backend.observability.tracing import configure_tracing, shutdown_tracing
from backend.tasks.reaper import expire_containers, reap_idle_workers
from backend.tools.sandbox.self_check import SandboxUnavailable


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings()
    services = build_services(settings)
    configure_tracing(record_content=settings.TRACE_CONTENT)
    metrics = None
    if settings.METRICS_ENABLED:
        metrics = MetricsApp(allowed_networks(settings.METRICS_ALLOWED))
        register_gauges(
            Gauges(services.executors.warm_count, services.limits.runs.total, settings.DATA_DIR)
        )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.SANDBOX_REQUIRED:  # no request is served before a sandbox ran a line
            try:
                await services.sandbox_check.require()
            except SandboxUnavailable:
                await services.close()
                raise
        # In the background (done already if required): /api/status says "checking" until then.
        sandbox_check = asyncio.create_task(services.sandbox_check.run())
        reaper = asyncio.create_task(
            reap_idle_workers(services.executors, settings.SANDBOX_IDLE_SECONDS)
        )
        expiry = asyncio.create_task(expire_containers(services.containers))
        usage = asyncio.create_task(services.limits.usage.run())
        own_port = None
        if metrics is not None and settings.METRICS_PORT:
            own_port = metrics_server(metrics, settings.METRICS_HOST, settings.METRICS_PORT)
            serving_metrics = asyncio.create_task(own_port.serve())
        async with serving(mcp_sessions):
            yield
        if own_port is not None:
            own_port.should_exit = True
            await serving_metrics
        reaper.cancel()
        expiry.cancel()
        usage.cancel()
        sandbox_check.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sandbox_check  # its sandbox stopped and its folder removed
        await services.close()
        shutdown_tracing()  # what is buffered is sent

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
    app.add_middleware(SecurityHeadersMiddleware)  # every response has them
    app.add_middleware(ObserveMiddleware)  # measures (and traces) all of it
    if settings.TRUSTED_PROXIES:  # X-Forwarded-For and -Proto, only from those addresses
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=settings.TRUSTED_PROXIES)
    app.add_middleware(SocketPeerMiddleware)  # outermost: the socket's address, as it came
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    if metrics is not None and not settings.METRICS_PORT:
        app.router.routes.append(Route("/metrics", metrics, methods=["GET"]))
    mcp_sessions = mount_mcp(app, services)  # this server as an MCP server, at /mcp
    mount_ui(app)  # same origin as the API: no CORS needed
    return app
