"""This server as an MCP server (issue 28), driven by the official `mcp` SDK's client over
Streamable HTTP against a real server on loopback.

Each user connects with a personal API key. The tools list with their schemas; run_python
keeps a session's variables between calls and returns a plot as image content; list_files
and describe_file show a session's data. Another user's session, a deleted one and a
traversal id are "not found" or refused, as tool errors; a wrong key is a 401.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, ImageContent, TextContent

from tests.conftest import scripted_server
from tests.support.agent_script import react_turn, slow_turn
from tests.support.live_server import LiveServer
from tests.support.mcp_keys import api_key

PNG = b"\x89PNG\r\n\x1a\n"


ASK = "Q-MCP-ASK"
SLOW = "Q-MCP-SLOW"
SESSIONS = 3  # USER_MAX_MCP_SESSIONS
REPLIES = [
    *react_turn(ASK, code="print('total:', 40)\n", answer="The total is 40."),
    {"when": ["[stage: review]", ASK], "content": '{"answers_question": true}', "repeat": True},
    *slow_turn(SLOW),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("mcp")
    with scripted_server(root, REPLIES, USER_MAX_MCP_SESSIONS=str(SESSIONS)) as live:
        yield live


def mcp_http(key: str) -> httpx2.AsyncClient:
    """An MCP client's HTTP client with `key`, timed like the SDK's default one: 30 s, and
    300 s to read, since the server may hold a stream open."""
    return httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30.0, read=300.0)
    )


def call(server: LiveServer, key: str, *calls: tuple[str, dict[str, Any]]) -> list[Any]:
    """Connect with `key`, list the tools, make `calls` in one MCP session."""

    async def session() -> list[Any]:
        http = mcp_http(key)
        transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
        async with http, Client(transport) as client:
            results: list[Any] = [await client.list_tools()]
            for name, arguments in calls:
                results.append(await client.call_tool(name, arguments))
            return results

    return anyio.run(session)


def text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def test_the_tools_list_with_their_schemas_and_a_session_keeps_its_variables(
    server: LiveServer,
) -> None:
    key = api_key(server, "mcp-alice")
    tools, first, second, plotted, sessions, files = call(
        server,
        key,
        ("run_python", {"session_id": "mcp-s1", "code": "x = 20\nprint('set', x)"}),
        ("run_python", {"session_id": "mcp-s1", "code": "print('x is', x + 1)"}),
        (
            "run_python",
            {
                "session_id": "mcp-s1",
                "code": "import matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4])\n"
                "plt.savefig('outputs/line.png')\nprint('saved')",
            },
        ),
        ("list_sessions", {}),
        ("list_files", {"session_id": "mcp-s1"}),
    )
    by_name = {tool.name: tool for tool in tools.tools}
    assert set(by_name) >= {"run_python", "list_sessions", "list_files", "describe_file"}
    assert by_name["run_python"].input_schema["required"] == ["session_id", "code"]
    assert all(tool.description and "\n" not in tool.description for tool in by_name.values())

    assert not first.is_error and "set 20" in text(first)
    assert not second.is_error and "x is 21" in text(second)  # the variable carried over
    assert second.structured_content["success"] is True
    # Each PNG the run wrote (the one it saved, and the figure the sandbox keeps) is an image.
    images = [c for c in plotted.content if isinstance(c, ImageContent)]
    pngs = [f for f in plotted.structured_content["files"] if f.endswith(".png")]
    assert "outputs/line.png" in pngs and len(images) == len(pngs)
    assert all(base64.b64decode(i.data).startswith(PNG) for i in images)
    assert {i.mime_type for i in images} == {"image/png"}
    assert "mcp-s1" in [s["session_id"] for s in sessions.structured_content["sessions"]]
    paths = [f["path"] for f in files.structured_content["files"]]
    assert "outputs/line.png" in paths


def test_a_failing_run_is_a_tool_error_with_its_traceback(server: LiveServer) -> None:
    key = api_key(server, "mcp-carol")
    _, failed = call(server, key, ("run_python", {"session_id": "c1", "code": "1 / 0"}))
    assert failed.is_error
    assert "ZeroDivisionError" in text(failed)


def test_describe_file_shows_an_uploaded_csv(server: LiveServer, tmp_path: Path) -> None:
    key = api_key(server, "mcp-dave")
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}) as http:
        uploaded = http.post(
            "/api/upload",
            data={"session_id": "d1"},
            files={"file": ("sales.csv", b"region,price\nnorth,10\nsouth,30\n", "text/csv")},
        )
        assert uploaded.status_code == 201, uploaded.text
    _, described, missing, traversal = call(
        server,
        key,
        ("describe_file", {"session_id": "d1", "path": "uploads/sales.csv"}),
        ("describe_file", {"session_id": "d1", "path": "uploads/nothing.csv"}),
        ("describe_file", {"session_id": "d1", "path": "../../etc/passwd"}),
    )
    assert not described.is_error, text(described)
    info = described.structured_content
    assert info["kind"] == "tabular" and info["details"]["rows"] == 2
    assert [c["name"] for c in info["details"]["columns"]] == ["region", "price"]
    assert missing.is_error and "File not found" in text(missing)
    assert traversal.is_error


def test_another_users_session_is_not_found_and_a_wrong_key_is_a_401(
    server: LiveServer,
) -> None:
    owner, intruder = api_key(server, "mcp-erin"), api_key(server, "mcp-frank")
    call(server, owner, ("run_python", {"session_id": "secret", "code": "token = 42"}))
    _, files, described, sessions, reran, traversal = call(
        server,
        intruder,
        ("list_files", {"session_id": "secret"}),
        ("describe_file", {"session_id": "secret", "path": "variables"}),
        ("list_sessions", {}),
        ("run_python", {"session_id": "secret", "code": "print(token)"}),
        ("list_files", {"session_id": "../u1-secret"}),
    )
    for refused in (files, described):
        assert refused.is_error and "not found" in text(refused)
    assert "secret" not in [s["session_id"] for s in sessions.structured_content["sessions"]]
    # The same id is the intruder's own, new session: the owner's variable is not in it.
    assert reran.is_error and "NameError" in text(reran)
    assert traversal.is_error and "Invalid session_id" in text(traversal)

    for wrong in ("not-a-key", ""):
        headers = {"Authorization": f"Bearer {wrong}"} if wrong else {}
        refused = httpx2.post(
            f"{server.url}/mcp",
            headers={**headers, "Accept": "application/json, text/event-stream"},
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        )
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert refused.json()["code"] == "invalid_api_key"


def test_cancelling_a_call_stops_its_run(server: LiveServer) -> None:
    # A 20 s run is cancelled once it has started (its marker file is there); the sandbox
    # is stopped, not left sleeping: the next run starts at once, with the variables of
    # the runs before.
    key = api_key(server, "mcp-grace")
    long_run = (
        "from pathlib import Path\nimport time\n"
        "Path('outputs/started.txt').write_text('yes')\ntime.sleep(20)\nprint('finished')"
    )

    async def session() -> tuple[CallToolResult, float]:
        http = mcp_http(key)
        transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
        async with http, Client(transport) as client:
            await client.call_tool("run_python", {"session_id": "g1", "code": "before = 7"})
            async with anyio.create_task_group() as group:
                group.start_soon(
                    client.call_tool, "run_python", {"session_id": "g1", "code": long_run}
                )
                while True:  # until the run has begun: its file is in the workspace
                    listed = await client.call_tool("list_files", {"session_id": "g1"})
                    paths = [f["path"] for f in listed.structured_content["files"]]
                    if "outputs/started.txt" in paths:
                        break
                    await anyio.sleep(0.1)
                group.cancel_scope.cancel()
            started = time.monotonic()
            after = await client.call_tool(
                "run_python", {"session_id": "g1", "code": "print(before)"}
            )
            return after, time.monotonic() - started

    after, seconds = anyio.run(session)
    assert not after.is_error and "7" in text(after)
    assert seconds < 15, f"the next run waited {seconds:.1f} s: the cancelled one went on"


def test_ask_runs_a_whole_turn_with_progress_and_returns_its_citations(
    server: LiveServer,
) -> None:
    key = api_key(server, "mcp-heidi")
    progress: list[str] = []

    async def record(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def session() -> CallToolResult:
        http = mcp_http(key)
        transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
        async with http, Client(transport) as client:
            return await client.call_tool(
                "ask",
                {"session_id": "h1", "question": f"{ASK} what is the total?", "agent": "react"},
                progress_callback=record,
            )

    answered = anyio.run(session)
    assert not answered.is_error, text(answered)
    assert text(answered) == "The total is 40."
    result = answered.structured_content
    assert result["agent_type"] == "react" and result["session_id"] == "h1"
    [citation] = result["citations"]
    assert citation["text"] == "40" and citation["kind"] == "computed"
    assert citation["output_line"] == "total: 40"
    assert progress[0].startswith("The react agent answers")
    assert progress[1:] == ["Calling python_coder", "Running code (attempt 1)", "The code ran"]


def test_a_sessions_files_are_resources_of_their_owner_only(server: LiveServer) -> None:
    owner, intruder = api_key(server, "mcp-ivan"), api_key(server, "mcp-judy")
    call(
        server,
        owner,
        ("run_python", {"session_id": "i1", "code": "open('outputs/a.txt', 'w').write('hello')"}),
    )

    async def read(key: str, uri: str) -> Any:
        http = mcp_http(key)
        transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
        async with http, Client(transport) as client:
            templates = await client.list_resource_templates()
            assert [t.uri_template for t in templates.resource_templates] == [
                "session://{session_id}/{+path}"
            ]
            try:
                return await client.read_resource(uri)
            except MCPError as exc:
                return exc

    read_back = anyio.run(read, owner, "session://i1/outputs/a.txt")
    [contents] = read_back.contents
    assert base64.b64decode(contents.blob) == b"hello"
    for key, uri, why in (
        (intruder, "session://i1/outputs/a.txt", "Session 'i1' not found"),  # another user's
        (owner, "session://i1/outputs/none.txt", "File not found"),
        (owner, "session://gone/outputs/a.txt", "Session 'gone' not found"),
        # Out of the workspace: the SDK's path check refuses it before the lookup.
        (owner, "session://i1/../../etc/passwd", "Unknown resource"),
    ):
        refused = anyio.run(read, key, uri)
        assert isinstance(refused, MCPError) and why in str(refused), (uri, refused)


def test_a_user_holds_at_most_their_share_of_mcp_sessions(server: LiveServer) -> None:
    # Sessions are the handshake revisions' (up to 2025-11-25; the 2026 revision has none):
    # a host that opens them without end must not fill the SDK's table for everyone.
    greedy, other = api_key(server, "mcp-kim"), api_key(server, "mcp-leo")
    accept = {"Accept": "application/json, text/event-stream"}

    def initialize(key: str) -> httpx2.Response:
        return httpx2.post(
            f"{server.url}/mcp",
            headers={"Authorization": f"Bearer {key}", **accept},
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"},
                },
            },
        )

    opened = [initialize(greedy) for _ in range(SESSIONS)]
    assert [r.status_code for r in opened] == [200] * SESSIONS
    refused = initialize(greedy)
    assert refused.status_code == 429
    assert refused.json()["code"] == "too_many_mcp_sessions"
    assert f"You have {SESSIONS} MCP sessions open" in refused.json()["detail"]
    assert initialize(other).status_code == 200  # another user is not held up by this one

    ended = httpx2.delete(
        f"{server.url}/mcp",
        headers={
            "Authorization": f"Bearer {greedy}",
            "Mcp-Session-Id": opened[0].headers["mcp-session-id"],
            "Mcp-Protocol-Version": "2025-11-25",
            **accept,
        },
    )
    assert ended.status_code == 200
    assert initialize(greedy).status_code == 200  # one ended: room for one more


def test_a_session_answers_only_the_user_who_opened_it(server: LiveServer) -> None:
    # Issue 40: the tools act as the caller, but a session's stream and its end are the
    # opener's; with another user's key, a session id is "not found", as if it ended.
    owner, intruder = api_key(server, "mcp-olga"), api_key(server, "mcp-pavel")
    accept = {"Accept": "application/json, text/event-stream"}

    def send(key: str, verb: str, session: str | None = None, **body: Any) -> httpx2.Response:
        headers = {"Authorization": f"Bearer {key}", "Mcp-Protocol-Version": "2025-11-25"}
        if session is not None:
            headers["Mcp-Session-Id"] = session
        json = {"jsonrpc": "2.0", **body} if body else None
        return httpx2.request(verb, f"{server.url}/mcp", headers={**headers, **accept},
                              json=json, timeout=30)  # fmt: skip

    opened = send(owner, "POST", id=1, method="initialize", params={
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"}})  # fmt: skip
    assert opened.status_code == 200, opened.text
    session = opened.headers["mcp-session-id"]
    ready = send(owner, "POST", session, method="notifications/initialized")
    assert ready.status_code == 202, ready.text

    listed = send(intruder, "POST", session, id=2, method="tools/list")
    assert listed.status_code == 404 and listed.json()["code"] == "mcp_session_not_found"
    assert "run_python" not in listed.text
    assert send(intruder, "GET", session).status_code == 404  # its stream of messages
    assert send(intruder, "DELETE", session).status_code == 404  # its end
    assert send(intruder, "POST", "no-such-session", id=3, method="tools/list").status_code == 404
    # The owner's session is still there, and answers.
    mine = send(owner, "POST", session, id=4, method="tools/list")
    assert mine.status_code == 200 and "run_python" in mine.text
    assert send(owner, "DELETE", session).status_code == 200


def test_a_limit_is_a_tool_error_with_the_rest_apis_message(server: LiveServer) -> None:
    key = api_key(server, "mcp-mallory")
    fill = "open('outputs/big.bin', 'wb').write(b'x' * 2_000_000)"
    _, filled = call(server, key, ("run_python", {"session_id": "m1", "code": fill}))
    assert not filled.is_error, text(filled)
    with server.client() as admin:  # now past the quota: a run could write nothing
        [me] = [u for u in admin.get("/api/users").json() if u["username"] == "mcp-mallory"]
        limited = admin.patch(f"/api/users/{me['id']}", json={"limits": {"max_disk_mb": 1}})
        assert limited.status_code == 200
    _, refused = call(server, key, ("run_python", {"session_id": "m1", "code": "print(1)"}))
    assert refused.is_error
    # The SDK names the tool first; the message is the REST API's 507's.
    assert "Your disk quota is full: your sessions use 2 MB of your 1 MB" in text(refused)


def test_cancelling_ask_stops_its_turn(server: LiveServer) -> None:
    # The turn's code sleeps 20 s; once it is running (its progress says so) the host
    # cancels, as Stop does in the UI: the sandbox is free again at once.
    key = api_key(server, "mcp-nina")

    async def session() -> tuple[CallToolResult, float]:
        http = mcp_http(key)
        transport = streamable_http_client(f"{server.url}/mcp", http_client=http)
        running = anyio.Event()

        async def progress(done: float, total: float | None, message: str | None) -> None:
            if message and message.startswith("Running code"):
                running.set()

        async with http, Client(transport) as client:
            arguments = {"session_id": "n1", "question": f"{SLOW} wait", "agent": "react"}
            async with anyio.create_task_group() as group:
                group.start_soon(
                    lambda: client.call_tool("ask", arguments, progress_callback=progress)
                )
                await running.wait()
                group.cancel_scope.cancel()
            started = time.monotonic()
            after = await client.call_tool("run_python", {"session_id": "n1", "code": "print(5)"})
            return after, time.monotonic() - started

    after, seconds = anyio.run(session)
    assert not after.is_error and "5" in text(after)
    assert seconds < 15, f"the next run waited {seconds:.1f} s: the cancelled turn went on"
