"""This server as an MCP server: Streamable HTTP at `/mcp`, built with the official SDK.

An MCP host (Claude Desktop, VS Code, the MCP Inspector, an agent framework) reaches the
sandbox here, with each session's state, files and limits. Every request carries a
personal API key (or a login token) as its bearer token: `mcp_auth.py` answers a 401
without one; each tool resolves the user from the same header, so every call acts as
that user, under their limits, and sees their sessions only (another user's session,
or one that does not exist, is "not found"). The errors are the REST API's own
messages, as MCP tool errors.

The protocol is the SDK's: this module only declares the tools.
"""

from __future__ import annotations

import asyncio
import base64
import mimetypes
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError, ToolError
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, ContentBlock, ImageContent, TextContent
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route

from backend.api import mcp_ask
from backend.api.mcp_auth import McpAuth, bearer_token
from backend.api.mcp_errors import as_tool_errors
from backend.api.mcp_sources import add_source_tools
from backend.core.accounts import authenticate
from backend.core.router import AgentType
from backend.core.services import Services
from backend.files.catalog import FileNotInWorkspace
from backend.files.model import UnsupportedFileType
from backend.files.tables import TABLES_FOLDER
from backend.storage import User
from backend.storage.sessions import SessionKey, session_key, valid_session_id
from backend.storage.workspaces import NotARegularFile, UnsafePath

INSTRUCTIONS = (
    "A Python data-analysis sandbox. Each session_id names a workspace of its own (uploaded "
    "files, variables that persist between runs, plots). Call list_sessions to find one, "
    "list_files and describe_file to see its data, and run_python to analyse it. Databases "
    "are data sources: list_data_sources, describe_data_source and query_data_source, or "
    "attach_data_sources to a session, where code calls sql(name, query)."
)
# One line each, for a model to act on.
ASK = (
    "Ask the data agent about a session's data: it writes and runs the code, and answers "
    "with each number's source (its steps arrive as progress)."
)
RUN_PYTHON = (
    "Run Python in a session's sandbox (variables persist between calls); returns the "
    "output, errors, files written, and plots as images."
)
_MAX_PLOT_BYTES = 5 * 1024 * 1024  # a plot larger than this is named, not sent
_MAX_RESOURCE_BYTES = 20 * 1024 * 1024  # a larger file is for the REST API's download
_BAD_SESSION = "Invalid session_id: use letters, digits, '.', '-' or '_' (see list_sessions)."


class SessionInfo(BaseModel):
    session_id: str
    title: str
    updated_at: float  # seconds since the epoch


class SessionList(BaseModel):
    sessions: list[SessionInfo]


class FileEntry(BaseModel):
    path: str
    size: int
    modified: float


class FileList(BaseModel):
    files: list[FileEntry]


def build_mcp_server(services: Services) -> MCPServer:
    """The MCP server's tools, each acting as the user of the request's bearer token."""
    server: MCPServer = MCPServer("python-data-agent", instructions=INSTRUCTIONS, version="0.1.0")

    def caller(ctx: Context) -> User:
        user = authenticate(services.store, services.secret_key, bearer_token(ctx.headers))
        if user is None or user.disabled:  # mcp_auth.py let the request in: it changed since
            raise ToolError("Invalid or expired token: log in again.")
        return user

    def checked(session_id: str) -> str:
        """The id as given, or a tool error for one that could name no session."""
        if not valid_session_id(session_id):
            raise ToolError(_BAD_SESSION)
        return session_id

    def owned(user: User, session_id: str) -> SessionKey:
        """The key of the user's session, or the REST API's "not found"."""
        key = session_key(user.id, checked(session_id))
        if services.store.session_owner(key) != user.id:
            raise ToolError(f"Session '{session_id}' not found: see list_sessions.")
        return key

    @server.tool()
    async def list_sessions(ctx: Context) -> SessionList:
        """List your sessions (each a conversation with its own workspace), newest first."""
        user = caller(ctx)
        return SessionList(
            sessions=[
                SessionInfo(session_id=c.session_id, title=c.title, updated_at=c.updated_at)
                for c in services.store.list_conversations(user.id)
            ]
        )

    @server.tool()
    async def list_files(session_id: str, ctx: Context) -> FileList:
        """List the files of a session's workspace: uploads, outputs (plots), variables."""
        key = owned(caller(ctx), session_id)
        await services.shared.pull(key)
        files = await run_in_threadpool(services.workspaces.list_files, key)
        hidden = TABLES_FOLDER + "/"  # a table's own Parquet, as in the REST API
        return FileList(
            files=[
                FileEntry(path=f.path, size=f.size, modified=f.modified)
                for f in files
                if not f.path.startswith(hidden)
            ]
        )

    @server.tool()
    async def describe_file(session_id: str, path: str, ctx: Context) -> dict[str, Any]:
        """Describe a data file of a session: its type, size, columns, rows and a preview."""
        key = owned(caller(ctx), session_id)
        await services.shared.pull(key)
        try:
            metadata = await services.catalog.info(key, path)
        except UnsafePath:
            raise ToolError(f"Invalid file path: {path}") from None
        except (FileNotInWorkspace, NotARegularFile):
            raise ToolError(f"File not found: {path} (see list_files).") from None
        except UnsupportedFileType as exc:
            raise ToolError(str(exc)) from None
        return metadata.to_dict()

    @server.resource(
        "session://{session_id}/{+path}",
        name="session-file",
        description="A file of one of your sessions' workspaces (list_files names them).",
    )
    async def session_file(session_id: str, path: str, ctx: Context) -> bytes:
        try:
            key = owned(caller(ctx), session_id)
        except ToolError as exc:
            raise ResourceNotFoundError(str(exc)) from None
        await services.shared.pull(key)
        try:
            return await run_in_threadpool(_read_file, services, key, path)
        except (UnsafePath, NotARegularFile, OSError):
            raise ResourceNotFoundError(f"File not found: {path} (see list_files).") from None

    @server.tool(description=ASK)
    async def ask(
        session_id: str, question: str, ctx: Context, agent: AgentType = "auto"
    ) -> CallToolResult:
        user, session_id = caller(ctx), checked(session_id)
        with as_tool_errors():
            return await mcp_ask.ask(services, user, session_id, question, agent, ctx)

    @server.tool(description=RUN_PYTHON)
    async def run_python(session_id: str, code: str, ctx: Context) -> CallToolResult:
        user, session_id = caller(ctx), checked(session_id)
        with as_tool_errors():
            run = await services.python_coder.run_code(user, session_id, code)
        result = run.result
        text = result.stdout or ("" if result.error else "(no output)")
        if result.stderr:
            text += f"\n[stderr]\n{result.stderr}"
        if result.error:
            text += f"\n[error]\n{result.error}"
        if result.files:
            text += "\n[files written]\n" + "\n".join(result.files)
        content: list[ContentBlock] = [TextContent(type="text", text=text.strip())]
        key = session_key(user.id, session_id)
        for path in result.files:
            image = await run_in_threadpool(_plot, services, key, path)
            if image is not None:
                content.append(image)
        return CallToolResult(
            content=content,
            structured_content={
                "success": result.success,
                "stdout": result.stdout,
                "stderr": result.stderr,
                "error": result.error,
                "files": result.files,
                "truncated": result.truncated,
            },
            is_error=not result.success,
        )

    add_source_tools(server, services, caller)
    return server


def mount_mcp(app: FastAPI, services: Services) -> StreamableHTTPSessionManager:
    """Serve the MCP server at `/mcp`, behind the bearer check; the app's lifespan runs
    the returned session manager (`async with serving(manager)`)."""
    server = build_mcp_server(services)
    # The SDK's DNS-rebinding guard is for servers that trust whoever reaches them; every
    # request here needs an API key in a header, which a rebound page cannot send.
    server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False)
    )
    manager = server.session_manager
    endpoint = McpAuth(StreamableHTTPASGIApp(manager), services, manager)
    app.router.routes.append(Route("/mcp", endpoint=endpoint, methods=["GET", "POST", "DELETE"]))
    return manager


@asynccontextmanager
async def serving(manager: StreamableHTTPSessionManager) -> AsyncIterator[None]:
    """Run the MCP session manager for the app's lifetime, in a task of its own: its task
    group must end in the task it began in, which an app's lifespan need not be."""
    started, stop = asyncio.Event(), asyncio.Event()

    async def serve() -> None:
        async with manager.run():
            started.set()
            await stop.wait()

    task = asyncio.create_task(serve())
    waiting = asyncio.create_task(started.wait())
    await asyncio.wait({task, waiting}, return_when=asyncio.FIRST_COMPLETED)
    waiting.cancel()
    if task.done():
        task.result()  # it failed to start: say why
    try:
        yield
    finally:
        stop.set()
        await task


def _read_file(services: Services, key: SessionKey, path: str) -> bytes:
    if path.startswith(TABLES_FOLDER + "/"):
        raise FileNotFoundError(path)  # a table's own Parquet, hidden as in the REST API
    with services.workspaces.open_file(key, path) as file:
        data = file.read(_MAX_RESOURCE_BYTES + 1)
    if len(data) > _MAX_RESOURCE_BYTES:
        raise ResourceError(
            f"{path} is over {_MAX_RESOURCE_BYTES // 2**20} MB: download it with "
            "GET /api/sessions/{session_id}/files/{path} instead."
        )
    return data


def _plot(services: Services, key: SessionKey, path: str) -> ImageContent | None:
    """A PNG or JPEG the run wrote, as MCP image content; None for any other file."""
    mime = mimetypes.guess_type(path)[0]
    if mime not in ("image/png", "image/jpeg"):
        return None
    with services.workspaces.open_file(key, path) as file:
        data = file.read(_MAX_PLOT_BYTES + 1)
    if len(data) > _MAX_PLOT_BYTES:
        return None
    return ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type=mime)
