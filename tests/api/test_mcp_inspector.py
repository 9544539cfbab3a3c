"""A second, independent MCP client (issue 28): the MCP Inspector's CLI mode
(`@modelcontextprotocol/inspector`, pinned by tests/mcp_clients/package-lock.json) lists
this server's tools and calls run_python over Streamable HTTP, with an API key."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import scripted_server
from tests.support.live_server import ROOT, LiveServer
from tests.support.mcp_keys import api_key

INSPECTOR = ROOT / "tests" / "mcp_clients" / "node_modules" / ".bin" / "mcp-inspector"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(tmp_path_factory.mktemp("inspector"), []) as live:
        yield live


def run_inspector(
    server: LiveServer, key: str, home: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """The Inspector's CLI, once, against /mcp; never interactive (no OAuth prompt)."""
    return subprocess.run(
        [
            *(str(INSPECTOR), "--cli", f"{server.url}/mcp", "--transport", "http"),
            *("--stored-auth-only", "--header", f"Authorization: Bearer {key}", *args),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(home),
            "MCP_CATALOG_PATH": str(home / "mcp.json"),
        },
        check=False,
    )


def inspector(server: LiveServer, key: str, home: Path, *args: str) -> Any:
    """Its JSON answer."""
    done = run_inspector(server, key, home, *args)
    assert done.returncode == 0, done.stderr + done.stdout
    return json.loads(done.stdout)


def test_the_inspector_lists_and_calls_the_tools(server: LiveServer, tmp_path: Path) -> None:
    key = api_key(server, "inspector-user")
    listed = inspector(server, key, tmp_path, "--method", "tools/list")
    names = {tool["name"] for tool in listed["tools"]}
    assert {"run_python", "ask", "list_sessions", "list_files", "describe_file"} <= names
    called = inspector(
        server, key, tmp_path, "--method", "tools/call", "--tool-name", "run_python",
        "--tool-arg", "session_id=inspected", "--tool-arg", "code=print(6 * 7)",
    )  # fmt: skip
    assert not called.get("isError") and "42" in called["content"][0]["text"]
    assert called["structuredContent"]["success"] is True


def test_the_inspector_is_refused_with_a_wrong_key(server: LiveServer, tmp_path: Path) -> None:
    done = run_inspector(server, "wrong", tmp_path, "--method", "tools/list")
    assert done.returncode != 0, done.stdout
    error = json.loads(done.stderr)["error"]
    # The 401 makes it ask for authorization, and it shows the server's own message.
    assert error["code"] == "auth_required"
    assert "Invalid or expired token: create a new API key." in error["message"]
