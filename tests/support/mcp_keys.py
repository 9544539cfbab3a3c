"""A new user's personal API key, the credential an MCP host connects with."""

from __future__ import annotations

from tests.support.live_server import LiveServer


def api_key(server: LiveServer, name: str) -> str:
    """A new user's personal API key."""
    with server.client() as admin:
        created = admin.post("/api/users", json={"username": name, "password": "p" * 12})
        assert created.status_code == 201, created.text
    with server.client(server.token(name, "p" * 12)) as http:
        return str(http.post("/api/keys", json={"name": "mcp"}).json()["key"])
