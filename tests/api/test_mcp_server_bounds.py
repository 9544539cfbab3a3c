"""The bounds on the MCP servers an admin registers (issue 40), tried as a careless or
hostile admin would, on a live server.

A stdio server's program runs with a fixed environment, the operator's arguments, in a
scratch folder outside DATA_DIR, and (bubblewrap being here) without a view of DATA_DIR:
a spy server (tests/mcp_servers/spy) reports what it sees through its tool. Secrets whose
names change how a program loads code are refused. A server's secrets stay behind when
another admin points it elsewhere. A remote's answer is never quoted in an error.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.conftest import scripted_server
from tests.support.agent_script import sse_events
from tests.support.live_server import LiveServer

SPY = Path(__file__).resolve().parents[1] / "mcp_servers/spy/spy_server.py"
PASSWORD = "p" * 12
CANARY = "CANARY-internal-body-7f3a"
REPLIES: list[dict[str, Any]] = [
    {"when": "[stage: review]", "content": '{"answers_question": true}', "repeat": True},
    {
        "when": ["[stage: react]", "Q-LOOK", "Question:"],
        "content": "Action: spy__look\nAction Input: {}",
    },
    {
        "when": ["[stage: react]", "Q-LOOK", "Result of spy__look"],
        "content": "Final Answer: Looked.",
    },
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("mcp-bounds")
    data_dir = root / "data"  # scripted_server's
    # The operator allows the spy, pinned to look at DATA_DIR and the server's key there.
    pinned = {sys.executable: [str(SPY), str(data_dir / "secret_key"), str(data_dir)]}
    env = {"MCP_STDIO_PROGRAMS": json.dumps(pinned), "SANDBOX": "bwrap"}
    with scripted_server(root, REPLIES, **env) as live:
        yield live


class Recorder(BaseHTTPRequestHandler):
    """A loopback HTTP server that is no MCP server: it records each request's headers
    and answers with a body holding CANARY, shaped by its path."""

    seen: ClassVar[list[tuple[str, dict[str, str]]]] = []
    ANSWERS: ClassVar[dict[str, tuple[int, str, str]]] = {
        "/html": (200, "text/html", f"<html>{CANARY} ... {CANARY}</html>"),
        "/error": (500, "text/plain", f"internal error {CANARY}"),
        "/json": (200, "application/json", json.dumps({"note": CANARY})),
        "/not-json": (200, "application/json", f"{CANARY} {'x' * 2000} {CANARY}"),
        "/rpc-error": (400, "application/json", json.dumps(
            {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": CANARY}})),
    }  # fmt: skip

    def answer(self) -> None:
        self.seen.append((self.path, dict(self.headers.items())))
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        status, kind, body = self.ANSWERS.get(self.path, (404, "text/plain", CANARY))
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_GET = do_DELETE = answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def recorder() -> Iterator[str]:
    listener = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=listener.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.server_port}"
    listener.shutdown()
    listener.server_close()
    thread.join()


def look(server: LiveServer) -> dict[str, Any]:
    """A user's ReAct turn that calls the spy's `look`: what the spy saw."""
    with server.client() as admin:
        created = admin.post("/api/users", json={"username": "looker", "password": PASSWORD})
        assert created.status_code == 201, created.text
    body = {"message": "Q-LOOK what do you see?", "session_id": "look", "stream": True,
            "agent_type": "react"}  # fmt: skip
    with (
        server.client(server.token("looker", PASSWORD), timeout=120) as http,
        http.stream("POST", "/api/chat", json=body) as reply,
    ):
        assert reply.status_code == 200
        events = [data for name, data in sse_events(reply.iter_lines()) if name == "execution"]
    (execution,) = events
    assert execution["ok"], execution
    return dict(json.loads(execution["stdout"]))


def test_a_stdio_server_sees_no_data_dir_nor_the_servers_environment(server: LiveServer) -> None:
    with server.client() as admin:
        created = admin.post("/api/mcp-servers", json={
            "name": "spy", "transport": "stdio", "command": [sys.executable],
            "secrets": {"SPY_TOKEN": "spy-token-value"}, "allowed_tools": ["look"]})  # fmt: skip
    assert created.status_code == 201, created.text
    # The operator's pinned arguments are what the server runs with.
    assert created.json()["command"][1:] == [str(SPY), *[str(p) for p in probes(server)]]
    seen = look(server)
    key_file, data_dir = probes(server)
    assert key_file.exists() and "error" in seen["paths"][str(key_file)]
    assert key_file.read_text() not in json.dumps(seen)
    assert seen["paths"][str(data_dir)] == {"listed": []}  # an empty folder in its place
    environ = seen["environ"]
    cwd = Path(seen["cwd"])
    assert environ.pop("PWD", str(cwd)) == str(cwd)  # bubblewrap's, for its --chdir
    assert set(environ) == {"PATH", "HOME", "TMPDIR", "LANG", "SPY_TOKEN"}
    assert environ["SPY_TOKEN"] == "spy-token-value"
    assert environ["PATH"] == "/usr/local/bin:/usr/bin:/bin" and environ["LANG"] == "C.UTF-8"
    assert environ["HOME"] == environ["TMPDIR"] == str(cwd)
    assert not cwd.resolve().is_relative_to(server.data_dir.resolve())
    assert not (server.data_dir / "mcp-servers").exists()  # where they used to run
    # Its scratch folder goes when it stops.
    assert cwd.is_dir()
    with server.client() as admin:
        assert admin.delete(f"/api/mcp-servers/{created.json()['id']}").status_code == 204
    assert not cwd.exists()


def probes(server: LiveServer) -> tuple[Path, Path]:
    return server.data_dir / "secret_key", server.data_dir


@pytest.mark.parametrize(
    "name",
    ["PYTHONPATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "NODE_OPTIONS", "PATH", "HOME", "BASH_ENV",
     "PERL5OPT", "JAVA_TOOL_OPTIONS", "DYLD_INSERT_LIBRARIES", "lower_case", "WITH-DASH"],
)  # fmt: skip
def test_a_secret_that_could_change_how_a_program_loads_code_is_refused(
    server: LiveServer, name: str
) -> None:
    body = {"name": "loader", "transport": "stdio", "command": [sys.executable],
            "secrets": {name: "/tmp/evil"}}  # fmt: skip
    with server.client() as admin:
        refused = admin.post("/api/mcp-servers", json=body)
        assert refused.status_code == 400, refused.text
        assert name in refused.json()["detail"] and refused.json()["code"] == "secret_not_allowed"
        # A change is held to the same rule.
        body["secrets"] = {"SAFE_TOKEN": "x"}
        created = admin.post("/api/mcp-servers", json=body)
        assert created.status_code == 201, created.text
        url = f"/api/mcp-servers/{created.json()['id']}"
        changed = admin.patch(url, json={"secrets": {name: "/tmp/evil"}})
        assert changed.status_code == 400 and name in changed.json()["detail"]
        assert admin.delete(url).status_code == 204


def test_a_programs_arguments_are_the_operators(server: LiveServer) -> None:
    with server.client() as admin:
        for command in (
            [sys.executable, "-c", "import os; print(os.environ)"],
            [sys.executable, str(SPY), str(server.data_dir / "app.db")],
            [sys.executable, str(SPY), "../../app.db"],
        ):
            refused = admin.post("/api/mcp-servers", json={
                "name": "free", "transport": "stdio", "command": command})  # fmt: skip
            assert refused.status_code == 422, refused.text
            assert "pinned by the operator" in refused.json()["detail"]
        other = admin.post("/api/mcp-servers", json={
            "name": "other", "transport": "stdio", "command": ["/bin/sh", "-c", "id"]})  # fmt: skip
        assert other.status_code == 422 and "MCP_STDIO_PROGRAMS" in other.text


def test_another_admin_who_moves_a_server_gets_none_of_its_secrets(
    server: LiveServer, recorder: str
) -> None:
    with server.client() as admin:
        created = admin.post("/api/users", json={"username": "admin-b", "password": PASSWORD,
                                                 "is_admin": True})  # fmt: skip
        assert created.status_code == 201, created.text
        registered = admin.post("/api/mcp-servers", json={
            "name": "vault", "transport": "http", "url": "https://mcp.example.invalid/mcp",
            "secrets": {"Authorization": "Bearer A-SECRET-1",
                        "X-Api-Key": "A-SECRET-2"}})  # fmt: skip
        assert registered.status_code == 201, registered.text
    url = f"/api/mcp-servers/{registered.json()['id']}"
    with server.client(server.token("admin-b", PASSWORD)) as admin_b:
        moved = admin_b.patch(url, json={"url": f"{recorder}/moved"})
        assert moved.status_code == 200 and moved.json()["secret_names"] == []
        Recorder.seen.clear()
        assert admin_b.get(f"{url}/tools").status_code == 200  # connects to the new URL
        sent = [headers for path, headers in Recorder.seen if path == "/moved"]
        assert sent, "the server never connected to the new URL"
        assert "A-SECRET" not in json.dumps(sent)
        assert not any(k.lower() in ("authorization", "x-api-key") for h in sent for k in h)
        # Secrets given with the move are the only ones that go there.
        again = admin_b.patch(url, json={"url": f"{recorder}/again",
                                         "secrets": {"X-Team": "b"}})  # fmt: skip
        assert again.json()["secret_names"] == ["X-Team"]
        # A change that keeps the URL keeps the secrets.
        kept = admin_b.patch(url, json={"url": f"{recorder}/again", "secrets": {"X-More": "c"}})
        assert kept.json()["secret_names"] == ["X-More", "X-Team"]


@pytest.mark.parametrize(
    ("path", "said"),
    [("/html", "not MCP"), ("/error", "HTTP 500"), ("/json", "not MCP"),
     ("/not-json", "not MCP"), ("/rpc-error", "HTTP 400"), ("/missing", "HTTP 404")],
)  # fmt: skip
def test_an_error_never_quotes_what_the_remote_answered(
    server: LiveServer, recorder: str, path: str, said: str
) -> None:
    name = "remote_" + path.strip("/").replace("-", "_")
    with server.client() as admin:
        created = admin.post("/api/mcp-servers", json={
            "name": name, "transport": "http", "url": recorder + path})  # fmt: skip
        assert created.status_code == 201, created.text
        tools = admin.get(f"/api/mcp-servers/{created.json()['id']}/tools")
    assert tools.status_code == 200
    error = tools.json()["error"]
    assert error and CANARY not in error and "x" * 50 not in error
    assert said in error
