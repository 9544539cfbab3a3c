"""Creates the FastAPI application."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from backend.api.errors import install_error_handlers
from backend.api.limits import BodySizeLimitMiddleware
from backend.api.main import api_router
from backend.config import Settings, load_settings
from backend.core.services import build_services


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or load_settings()
    services = build_services(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        services.close()

    app = FastAPI(title="Python Data Agent", version="0.1.0", lifespan=lifespan)
    app.state.services = services
    app.add_middleware(
        CORSMiddleware,
        allow_origins=[
            f"http://{host}:{settings.FRONTEND_PORT}"
            for host in (settings.HOST, "localhost", "127.0.0.1")
        ],
        allow_methods=["*"],
        allow_headers=["*"],
    )
    app.add_middleware(BodySizeLimitMiddleware, max_bytes=settings.max_request_bytes)
    install_error_handlers(app)
    app.include_router(api_router)
    return app
