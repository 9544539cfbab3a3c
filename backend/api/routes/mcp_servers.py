"""The MCP servers the agents may use: admins register them, pick their tools and users."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request, Response, status
from starlette.concurrency import run_in_threadpool

from backend.api.deps import CurrentAdmin, RecordId, StoreDep
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.core.agents.mcp_tools import agent_name
from backend.core.mcp_registry import McpRegistry
from backend.models.mcp_servers import (
    McpServerCreate,
    McpServerPublic,
    McpServerTools,
    McpServerUpdate,
    McpToolPublic,
)
from backend.storage import McpServer, Store
from backend.tools.mcp_client.link import McpUnavailable

router = APIRouter(prefix="/api/mcp-servers", tags=["mcp-servers"], responses=CLIENT_ERRORS)


async def get_registry(request: Request) -> McpRegistry:
    registry: McpRegistry = request.app.state.services.mcp
    return registry


RegistryDep = Annotated[McpRegistry, Depends(get_registry)]


def _public(server: McpServer) -> McpServerPublic:
    return McpServerPublic(
        id=server.id,
        name=server.name,
        transport=server.transport,
        url=server.url,
        command=server.command,
        secret_names=server.secret_names,
        allowed_tools=server.allowed_tools,
        user_ids=server.user_ids,
        enabled=server.enabled,
        created_at=server.created_at,
    )


def _not_found() -> ApiError:
    return ApiError(404, "MCP server not found.", code="mcp_server_not_found")


def _known_users(store: Store, user_ids: list[int] | None) -> None:
    unknown = [u for u in user_ids or () if store.get_user_by_id(u) is None]
    if unknown:
        raise ApiError(
            422, f"No user has the id {unknown[0]}.", code="unknown_user", param="user_ids"
        )


@router.get("")
def read_mcp_servers(store: StoreDep, admin: CurrentAdmin) -> list[McpServerPublic]:
    """List the registered MCP servers; secrets by name only (admin only)."""
    return [_public(server) for server in store.list_mcp_servers()]


@router.post("", status_code=status.HTTP_201_CREATED)
def create_mcp_server(
    body: McpServerCreate, store: StoreDep, registry: RegistryDep, admin: CurrentAdmin
) -> McpServerPublic:
    """Register an MCP server; its agents' tools are none until `allowed_tools` names
    some (admin only)."""
    _known_users(store, body.user_ids)
    return _public(registry.register(body.model_dump()))


@router.patch("/{server_id}")
async def update_mcp_server(
    server_id: RecordId,
    body: McpServerUpdate,
    store: StoreDep,
    registry: RegistryDep,
    admin: CurrentAdmin,
) -> McpServerPublic:
    """Change a server's address, secrets, allowed tools, users or state (admin only)."""
    await run_in_threadpool(_known_users, store, body.user_ids)
    fields = body.model_dump(exclude={"everyone"})
    server = await registry.change(server_id, fields, everyone=bool(body.everyone))
    if server is None:
        raise _not_found()
    return _public(server)


@router.delete("/{server_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_mcp_server(
    server_id: RecordId, registry: RegistryDep, admin: CurrentAdmin
) -> Response:
    """Unregister a server; a stdio server's process stops (admin only)."""
    if not await registry.remove(server_id):
        raise _not_found()
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/{server_id}/tools")
async def read_mcp_server_tools(
    server_id: RecordId, store: StoreDep, registry: RegistryDep, admin: CurrentAdmin
) -> McpServerTools:
    """Connect to the server and list its tools, each marked allowed or not (admin only);
    for a server that cannot be reached, `error` says why."""
    server = await run_in_threadpool(store.get_mcp_server, server_id)
    if server is None:
        raise _not_found()
    try:
        tools = await registry.server_tools(server)
    except McpUnavailable as exc:
        return McpServerTools(tools=[], error=str(exc))
    allowed = set(server.allowed_tools)
    return McpServerTools(
        tools=[
            McpToolPublic(
                name=tool.name,
                agent_name=agent_name(server.name, tool.name),
                description=tool.description,
                input_schema=tool.input_schema,
                allowed=tool.name in allowed,
            )
            for tool in tools
        ]
    )
