"""The MCP servers an admin registered for the agents (`mcp_servers` table).

A server is reached over Streamable HTTP (`url`) or started as a child process
(`command`, stdio). Its secrets (HTTP headers, or a stdio server's environment) are
stored sealed: `sealed_secrets` is ciphertext the core layer made with the server's
key (`backend/core/secret_box.py`); only their names are kept in the clear.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

from backend.storage.database import Database

Transport = Literal["http", "stdio"]


@dataclass(frozen=True)
class McpServer:
    id: int
    name: str  # the prefix of its tools' names for the agents: `<name>__<tool>`
    transport: Transport
    url: str  # http
    command: list[str]  # stdio: the argv
    sealed_secrets: str  # ciphertext of a JSON object; "" for none
    secret_names: list[str]
    allowed_tools: list[str]  # the tools the agents are offered; none until an admin picks
    user_ids: list[int] | None  # who may use it; None: everyone
    enabled: bool
    created_at: float

    def usable_by(self, user_id: int) -> bool:
        return self.enabled and (self.user_ids is None or user_id in self.user_ids)


class McpServerNameTaken(Exception):
    """Another registered MCP server has this name."""


# The columns a create or an update writes, each as stored (lists as JSON text).
_FIELDS = (
    "name",
    "transport",
    "url",
    "command",
    "sealed_secrets",
    "secret_names",
    "allowed_tools",
    "user_ids",
    "enabled",
)


def _stored(field: str, value: Any) -> Any:
    if field in ("command", "secret_names", "allowed_tools"):
        return json.dumps(list(value))
    if field == "user_ids":
        return None if value is None else json.dumps(sorted(set(value)))
    if field == "enabled":
        return int(bool(value))
    return value


def _server(row: Any) -> McpServer:
    users = row["user_ids"]
    return McpServer(
        id=int(row["id"]),
        name=row["name"],
        transport=row["transport"],
        url=row["url"],
        command=json.loads(row["command"]),
        sealed_secrets=row["sealed_secrets"],
        secret_names=json.loads(row["secret_names"]),
        allowed_tools=json.loads(row["allowed_tools"]),
        user_ids=None if users is None else [int(u) for u in json.loads(users)],
        enabled=bool(row["enabled"]),
        created_at=row["created_at"],
    )


class McpServerRows:
    """The `Store`'s MCP server methods, over the SQL store's `database`."""

    database: Database

    def list_mcp_servers(self) -> list[McpServer]:
        with self.database.reading() as db:
            rows = db.execute("SELECT * FROM mcp_servers ORDER BY id").fetchall()
        return [_server(row) for row in rows]

    def get_mcp_server(self, server_id: int) -> McpServer | None:
        with self.database.reading() as db:
            row = db.execute("SELECT * FROM mcp_servers WHERE id = ?", (server_id,)).fetchone()
        return _server(row) if row else None

    def create_mcp_server(self, **fields: Any) -> McpServer:
        """`fields`: every one of `_FIELDS`."""
        columns = ", ".join(_FIELDS)
        values = tuple(_stored(f, fields[f]) for f in _FIELDS)
        try:
            with self.database.transaction() as db:
                row = db.execute(
                    f"INSERT INTO mcp_servers ({columns}, created_at)"
                    f" VALUES ({', '.join('?' for _ in _FIELDS)}, ?) RETURNING *",
                    (*values, time.time()),
                ).fetchone()
        except self.database.integrity_errors:
            raise McpServerNameTaken(fields["name"]) from None
        return _server(row)

    def update_mcp_server(self, server_id: int, **fields: Any) -> McpServer | None:
        """Set the given `_FIELDS`; None when there is no such server."""
        changed = [f for f in _FIELDS if f in fields]
        try:
            with self.database.transaction() as db:
                if changed:
                    db.execute(
                        f"UPDATE mcp_servers SET {', '.join(f'{f} = ?' for f in changed)}"
                        " WHERE id = ?",
                        (*(_stored(f, fields[f]) for f in changed), server_id),
                    )
                row = db.execute("SELECT * FROM mcp_servers WHERE id = ?", (server_id,)).fetchone()
        except self.database.integrity_errors:
            raise McpServerNameTaken(fields.get("name", "")) from None
        return _server(row) if row else None

    def delete_mcp_server(self, server_id: int) -> bool:
        with self.database.transaction() as db:
            return db.execute("DELETE FROM mcp_servers WHERE id = ?", (server_id,)).rowcount > 0
