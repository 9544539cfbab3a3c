"""Combines the route modules into one router."""

from fastapi import APIRouter

from backend.api.routes import (
    auth,
    chat,
    conversations,
    files,
    health,
    openai,
    responses,
    runs,
    tools,
    users,
)

api_router = APIRouter()
api_router.include_router(health.router)
api_router.include_router(auth.router)
api_router.include_router(users.router)
api_router.include_router(openai.router)
api_router.include_router(responses.router)
api_router.include_router(chat.router)
api_router.include_router(runs.router)
api_router.include_router(conversations.router)
api_router.include_router(tools.router)
api_router.include_router(files.router)
