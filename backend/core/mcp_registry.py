"""The MCP servers an admin registered: kept in the store, offered to the agents.

An admin registers a server (a Streamable HTTP URL with headers, or a stdio
command with its environment), picks the tools the agents may use, and the users
who may use it. Secrets are sealed with the server's key and never shown back:
only their names are. A secret is bound to where it goes: changing a server's URL or
command drops its secrets, unless the same change gives them again. A stdio command is
a program the operator listed with exactly the arguments it pinned, and its secrets'
names cannot change how a program loads code (`backend/tools/mcp_client/environment.py`).

At a turn's start, `agent_tools` gives the agents of one user the allowed tools of the
servers that user may use; a server that cannot be reached then is offered with the
tools it last listed (a call says what failed), or left out, and the turn goes on
either way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Literal

from starlette.concurrency import run_in_threadpool

from backend.config.mcp_programs import PinnedPrograms
from backend.core.agents.mcp_tools import McpTool
from backend.core.group_rights import rights_of
from backend.core.secret_box import SecretsUnreadable, seal, unseal
from backend.llm.turn import TurnLLM
from backend.storage import McpServer, Store
from backend.tools.mcp_client import Endpoint, McpLinks, ToolInfo
from backend.tools.mcp_client.environment import refused_secret_name
from backend.tools.mcp_client.link import McpUnavailable

log = logging.getLogger(__name__)


class McpRefused(ValueError):
    """An admin's server that may not be registered; the message says why, `param` which
    field it is about."""

    def __init__(self, message: str, param: Literal["command", "secrets"] = "command") -> None:
        super().__init__(message)
        self.param = param


class McpRegistry:
    def __init__(
        self,
        store: Store,
        secret_key: str,
        links: McpLinks,
        stdio_programs: PinnedPrograms | None = None,
    ) -> None:
        self.store = store
        self.secret_key = secret_key
        self.links = links
        self.stdio_programs = dict(stdio_programs or {})  # MCP_STDIO_PROGRAMS

    def pinned_command(self, command: Sequence[str]) -> list[str]:
        """The argv a stdio `command` runs with: its program, which the operator listed,
        with the arguments the operator pinned. The admin gives the program alone or
        with exactly those arguments; anything else is refused."""
        if not self.stdio_programs:
            raise McpRefused(
                "stdio MCP servers are off on this server: its operator lists the programs "
                "they may run in MCP_STDIO_PROGRAMS"
            )
        program = command[0] if command else ""
        if program not in self.stdio_programs:
            raise McpRefused(
                f"the program {program!r} is not in MCP_STDIO_PROGRAMS "
                f"(allowed: {', '.join(sorted(self.stdio_programs))})"
            )
        pinned = list(self.stdio_programs[program])
        if list(command[1:]) not in ([], pinned):
            raise McpRefused(
                f"the arguments of {program!r} are pinned by the operator in "
                f"MCP_STDIO_PROGRAMS: give the program alone, or with exactly {pinned}"
            )
        return [program, *pinned]

    @staticmethod
    def check_secret_names(names: Sequence[str]) -> None:
        """Refuse a stdio server's secret whose name is not a safe environment variable."""
        for name in names:
            why = refused_secret_name(name)
            if why is not None:
                raise McpRefused(why, "secrets")

    def register(self, fields: dict[str, Any]) -> McpServer:
        """A new server from an admin's `fields` (raises `McpServerNameTaken`)."""
        secrets = {k: v for k, v in (fields.pop("secrets", None) or {}).items() if v}
        if fields.get("transport") == "stdio":
            fields["command"] = self.pinned_command(fields.get("command") or ())
            self.check_secret_names(list(secrets))
        row = {
            "url": "",
            "command": [],
            "allowed_tools": [],
            "user_ids": None,
            "enabled": True,
            **{k: v for k, v in fields.items() if v is not None},
        }
        return self.store.create_mcp_server(**row, **self._sealed(secrets))

    async def change(
        self, server_id: int, fields: dict[str, Any], *, everyone: bool = False
    ) -> McpServer | None:
        """Set an admin's `fields` (None leaves one as it is; `everyone` opens the server
        to every user); None: no such server. A new URL or command drops the secrets
        kept: only those given with it go there."""
        changes = {k: v for k, v in fields.items() if v is not None and k != "secrets"}
        secrets: dict[str, str] | None = fields.get("secrets")
        if "command" in changes or "url" in changes or secrets is not None:
            current = await run_in_threadpool(self.store.get_mcp_server, server_id)
            if current is None:
                return None
            stdio = current.transport == "stdio"
            changes.pop("url" if stdio else "command", None)
            if stdio and "command" in changes:
                changes["command"] = self.pinned_command(changes["command"])
            if stdio and secrets:
                self.check_secret_names([name for name, value in secrets.items() if value])
            moved = (stdio and changes.get("command", current.command) != current.command) or (
                not stdio and changes.get("url", current.url) != current.url
            )
            if moved:  # another destination: what was sealed for the old one stays behind
                given = {name: value for name, value in (secrets or {}).items() if value}
                changes.update(self._sealed(given))
            elif secrets is not None:
                changes.update(self._sealed(self._merged(current, secrets)))
        if everyone:
            changes["user_ids"] = None
        server = await run_in_threadpool(self.store.update_mcp_server, server_id, **changes)
        if server is not None and not server.enabled:
            await self.forget(server_id)
        return server

    async def remove(self, server_id: int) -> bool:
        removed = await run_in_threadpool(self.store.delete_mcp_server, server_id)
        await self.forget(server_id)
        return removed

    def _merged(self, server: McpServer, given: dict[str, str]) -> dict[str, str]:
        """The server's secrets with `given` over them; an empty value removes one. Kept
        secrets that can no longer be unsealed (another SECRET_KEY) are dropped."""
        try:
            secrets = unseal(server.sealed_secrets, self.secret_key)
        except SecretsUnreadable:
            secrets = {}
        secrets.update(given)
        return {name: value for name, value in secrets.items() if value}

    def _sealed(self, secrets: dict[str, str]) -> dict[str, Any]:
        return {"sealed_secrets": seal(secrets, self.secret_key), "secret_names": sorted(secrets)}

    def endpoint(self, server: McpServer) -> Endpoint:
        """What a link needs to connect, checked again here: the operator may have taken
        a program off MCP_STDIO_PROGRAMS, or pinned other arguments, since the server was
        registered (a row from before the pins runs only if its arguments are the pins)."""
        command = server.command
        if server.transport == "stdio":
            try:
                command = self.pinned_command(server.command)
            except McpRefused as exc:
                raise McpUnavailable(f"MCP server '{server.name}': {exc}") from None
        try:
            secrets = unseal(server.sealed_secrets, self.secret_key)
        except SecretsUnreadable:
            raise McpUnavailable(
                f"the secrets of MCP server '{server.name}' were sealed under another "
                "SECRET_KEY: an admin must enter them again"
            ) from None
        return Endpoint(server.name, server.transport, server.url, tuple(command), secrets)

    async def server_tools(self, server: McpServer) -> list[ToolInfo]:
        """Every tool the server lists (raises `McpUnavailable` with the reason)."""
        link = await self.links.link(server.id, self.endpoint(server))
        return await link.tools()

    async def agent_tools(
        self, user_id: int, llm: TurnLLM, budget: int | None = None
    ) -> list[McpTool]:
        """The tools `user_id`'s agents are offered this turn, at most `budget` of them."""
        if budget is not None and budget <= 0:
            return []
        rights = rights_of(await run_in_threadpool(self.store.groups_of, user_id))
        servers = [
            s
            for s in await run_in_threadpool(self.store.list_mcp_servers)
            if s.usable_by(user_id) and rights.may_use_mcp_server(s.id) and s.allowed_tools
        ]
        found = await asyncio.gather(*(self._offered(s, llm) for s in servers))
        tools = [tool for offered in found for tool in offered]
        return tools if budget is None else tools[:budget]

    async def _offered(self, server: McpServer, llm: TurnLLM) -> Sequence[McpTool]:
        try:
            link = await self.links.link(server.id, self.endpoint(server))
        except McpUnavailable as exc:
            log.warning("MCP server %s: %s", server.name, exc)
            return []
        try:
            listed = await link.tools()
        except McpUnavailable as exc:  # its tools as last listed: a call will say what is wrong
            log.warning("MCP server %s: %s", server.name, exc)
            listed = link.listed
        allowed = set(server.allowed_tools)
        return [McpTool(link, info, llm) for info in listed if info.name in allowed]

    async def forget(self, server_id: int) -> None:
        """Stop a deleted or disabled server's connection."""
        await self.links.drop(server_id)
