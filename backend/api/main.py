"""The route modules, in the order the app matches them.

FastAPI (0.137 and later) keeps each included router as a node and walks the
nodes in order on every request, so the app includes these directly, the
hottest (the OpenAI-compatible routes) first. Their paths do not overlap, so the
order changes nothing else.
"""

from fastapi import APIRouter

from backend.api.routes import (
    auth,
    chat,
    containers,
    conversations,
    data_sources,
    evals,
    exports,
    feedback,
    files,
    groups,
    health,
    keys,
    mcp_servers,
    models,
    openai,
    openai_files,
    responses,
    runs,
    sso,
    tables,
    tools,
    tus,
    uploads,
    usage,
    users,
)

ROUTERS: tuple[APIRouter, ...] = (
    openai.router,
    responses.router,
    openai_files.router,
    containers.router,
    chat.router,
    runs.router,
    conversations.router,
    feedback.router,
    uploads.router,
    tus.router,
    files.router,
    tables.router,
    exports.router,
    tools.router,
    auth.router,
    sso.router,
    users.router,
    groups.router,
    usage.router,
    keys.router,
    data_sources.router,
    mcp_servers.router,
    models.router,
    evals.router,
    health.router,
)
