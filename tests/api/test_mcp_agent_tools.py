"""MCP tools for our agents: real MCP servers (mcp-server-time and mcp-server-sqlite over
stdio, server-everything over Streamable HTTP on loopback), registered by an admin,
called by a scripted ReAct turn on a live server."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import scripted_server
from tests.support.agent_script import sse_events
from tests.support.live_server import LiveServer
from tests.support.mcp_servers import everything_server, sqlite_server_command, time_server_command
from tests.support.processes import descendants
from tests.support.waiting import wait_for

REVIEW = {"when": "[stage: review]", "content": '{"answers_question": true}', "repeat": True}
TOKYO = '{"source_timezone": "UTC", "time": "16:30", "target_timezone": "Asia/Tokyo"}'
SECRET = "Bearer s3cret-header-value-never-shown"
PASSWORD = "p" * 12


def react(tag: str, when: list[str], content: str) -> dict[str, Any]:
    return {"when": ["[stage: react]", tag, *when], "content": content}


REPLIES: list[dict[str, Any]] = [
    REVIEW,
    # A tool the admin did not allow is never in the prompt: this reply must stay unused.
    react("Q-TIME", ["time__get_current_time"], "Final Answer: LEAKED get_current_time"),
    react(
        "Q-TIME",
        ["time__convert_time", "Question:"],
        f"Thought: convert it\nAction: time__convert_time\nAction Input: {TOKYO}",
    ),
    react(
        "Q-TIME",
        ["Observation: Result of time__convert_time"],
        "Thought: I know the answer\nFinal Answer: The time difference to Tokyo is 9.0 hours.",
    ),
    # A user the server is not open to sees none of its tools.
    react("Q-OTHER", ["time__"], "Final Answer: LEAKED to another user"),
    react("Q-OTHER", [], "Final Answer: No MCP tool here."),
    # A server that hangs is cut off at MCP_TOOL_TIMEOUT; the turn goes on.
    react(
        "Q-HANG",
        ["Question:"],
        "Action: everything__trigger-long-running-operation\n"
        'Action Input: {"duration": 120, "steps": 2}',
    ),
    react("Q-HANG", ["did not answer"], "Final Answer: The operation took too long."),
    react("Q-SUM", ["Question:"], 'Action: everything__get-sum\nAction Input: {"a": 2, "b": 3}'),
    react("Q-SUM", ["The sum of 2 and 3 is 5"], "Final Answer: The sum is 5."),
    # A result past MCP_TOOL_MAX_CHARS is cut before the agent reads it.
    react(
        "Q-BIG",
        ["Question:"],
        'Action: everything__echo\nAction Input: {"message": "' + "x" * 9000 + '"}',
    ),
    react("Q-BIG", ["cut at 8000 characters"], "Final Answer: It was long."),
    # A dead stdio server is started again on the next turn.
    react("Q-AGAIN", ["Question:"], f"Action: time__convert_time\nAction Input: {TOKYO}"),
    react("Q-AGAIN", ["Result of time__convert_time"], "Final Answer: Tokyo is 9.0 h ahead."),
    # The data example: the tables through MCP, a query's rows, then python_coder on them.
    react("Q-SQL", ["Question:"], "Action: sqlite__list_tables\nAction Input: {}"),
    react(
        "Q-SQL",
        ["Result of sqlite__list_tables", "sales"],
        "Action: sqlite__read_query\n"
        'Action Input: {"query": "SELECT region, amount FROM sales ORDER BY region"}',
    ),
    react(
        "Q-SQL",
        ["Result of sqlite__read_query"],
        "Action: python_coder\nAction Input: Q-SQL total and mean amount of the query's rows",
    ),
    {
        # python_coder sees what the MCP tools found (its REACTS section).
        "when": ["[stage: generate]", "Q-SQL", "Tool sqlite__read_query", "'north', 'amount': 25"],
        "content": "```python\nimport pandas as pd\n"
        "rows = pd.DataFrame({'region': ['east', 'north', 'south'], 'amount': [20, 25, 45]})\n"
        "print('total amount:', rows['amount'].sum())\n```",
    },
    react("Q-SQL", ["total amount: 90"], "Final Answer: The total amount is 90."),
    # Plan-and-Execute: the planner sees the allowed tools; a step's goal in plain words
    # becomes the tool's arguments through one structured call.
    {
        "when": ["[stage: plan]", "Q-PLAN", "time__convert_time"],
        "content": '{"steps": [{"goal": "Q-PLAN convert 16:30 UTC to Tokyo time", '
        '"tool": "time__convert_time", "success_criterion": "a Tokyo time"}]}',
    },
    {"when": ["[stage: tool_arguments]", "Q-PLAN", "target_timezone"], "content": TOKYO},
    {
        "when": ["[stage: final]", "Q-PLAN", '"time_difference": "+9.0h"'],
        "content": "It is 01:30 in Tokyo, a time difference of 9.0 hours.",
    },
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("mcp-agents")
    # Each program with the arguments the operator pins for it.
    pinned = [time_server_command(), sqlite_server_command(shop_database(folder))]
    programs = json.dumps({program: arguments for program, *arguments in pinned})
    env = {"MCP_TOOL_TIMEOUT": "4", "MCP_STDIO_PROGRAMS": programs}
    with scripted_server(folder, REPLIES, **env) as live:
        yield live


def shop_database(folder: Path) -> Path:
    """The database the operator pinned mcp-server-sqlite to (outside DATA_DIR)."""
    return folder / "shop.db"


@pytest.fixture(scope="module")
def everything() -> Iterator[str]:
    with everything_server() as url:
        yield url


def register(server: LiveServer, **body: Any) -> dict[str, Any]:
    with server.client() as admin:
        created = admin.post("/api/mcp-servers", json=body)
    assert created.status_code == 201, created.text
    return dict(created.json())


def user_client(server: LiveServer, name: str) -> tuple[int, httpx.Client]:
    with server.client() as admin:
        created = admin.post("/api/users", json={"username": name, "password": PASSWORD})
        assert created.status_code == 201, created.text
    return int(created.json()["id"]), server.client(server.token(name, PASSWORD), timeout=120)


def turn(http: httpx.Client, message: str, session: str) -> dict[str, list[dict[str, Any]]]:
    """One ReAct turn over /api/chat: each kind of event the stream sent, in order."""
    body = {"message": message, "session_id": session, "stream": True, "agent_type": "react"}
    events: dict[str, list[dict[str, Any]]] = {}
    with http.stream("POST", "/api/chat", json=body) as reply:
        assert reply.status_code == 200, reply.read()
        for name, data in sse_events(reply.iter_lines()):
            events.setdefault(name, []).append(data)
    return events


def gone(pid: int) -> bool:
    """The process exited (a zombie not reaped yet counts)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state == "Z"


def children(server: LiveServer, program: str = "mcp-server-time") -> list[int]:
    """The pids of the live server's `program` processes (at any depth) still running; the
    bubblewrap processes around one are not counted."""
    assert server.process is not None
    found = []
    for pid in descendants(server.process.pid):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        confining = Path(command.split(b"\0")[0].decode(errors="replace")).name == "bwrap"
        if program.encode() in command and not confining and not gone(pid):
            found.append(pid)
    return found


@pytest.fixture(scope="module")
def time_server(server: LiveServer) -> Iterator[dict[str, Any]]:
    """mcp-server-time over stdio, with one of its two tools allowed, for one user."""
    user_id, http = user_client(server, "time-user")
    http.close()
    yield register(
        server,
        name="time",
        transport="stdio",
        command=time_server_command(),
        allowed_tools=["convert_time"],
        user_ids=[user_id],
    )


def test_a_react_turn_uses_an_allowed_mcp_tool_and_cites_its_result(
    server: LiveServer, time_server: dict[str, Any]
) -> None:
    with server.client(server.token("time-user", PASSWORD), timeout=120) as http:
        events = turn(http, "Q-TIME how far ahead is Tokyo?", "time")
    (call,) = events["tool_call"]
    assert call["tool"] == "time__convert_time"
    (execution,) = events["execution"]
    assert execution["ok"] and '"Asia/Tokyo"' in execution["stdout"]
    assert "+9.0h" in execution["stdout"]  # the server's own answer
    (final,) = events["final"]
    assert final["text"] == "The time difference to Tokyo is 9.0 hours."
    (citation,) = final["citations"]
    assert citation["text"] == "9.0" and citation["kind"] == "tool"
    assert citation["source"] == "tool time__convert_time"
    assert "9.0h" in citation["output_line"]


def test_the_planner_plans_with_an_mcp_tool_and_its_step_fills_the_arguments(
    server: LiveServer, time_server: dict[str, Any]
) -> None:
    with server.client(server.token("time-user", PASSWORD), timeout=120) as http:
        body = {"message": "Q-PLAN what time is 16:30 UTC in Tokyo?", "session_id": "plan",
                "stream": True, "agent_type": "plan_execute"}  # fmt: skip
        with http.stream("POST", "/api/chat", json=body) as reply:
            events = list(sse_events(reply.iter_lines()))
    kinds = dict(events)
    assert [s["tool"] for s in kinds["plan"]["steps"]] == ["time__convert_time"]
    assert kinds["execution"]["ok"] and "01:30" in kinds["execution"]["stdout"]
    assert kinds["final"]["text"] == "It is 01:30 in Tokyo, a time difference of 9.0 hours."


def test_a_server_is_offered_only_to_its_users(
    server: LiveServer, time_server: dict[str, Any]
) -> None:
    _, http = user_client(server, "not-time-user")
    with http:
        events = turn(http, "Q-OTHER what time is it?", "other")
    assert events["final"][0]["text"] == "No MCP tool here."


def test_a_dead_stdio_server_is_started_again_on_the_next_turn(
    server: LiveServer, time_server: dict[str, Any]
) -> None:
    with server.client(server.token("time-user", PASSWORD), timeout=120) as http:
        if not children(server):  # started by a turn, not by the registration
            turn(http, "Q-TIME how far ahead is Tokyo?", "time-dead")
        (child,) = children(server)
        os.kill(child, signal.SIGKILL)
        wait_for(lambda: gone(child))
        events = turn(http, "Q-AGAIN how far ahead is Tokyo?", "time-again")
    assert events["execution"][0]["ok"], events["execution"]
    assert events["final"][0]["text"] == "Tokyo is 9.0 h ahead."
    (restarted,) = children(server)
    assert restarted != child


def test_a_hanging_server_is_cut_off_and_the_turn_goes_on(
    server: LiveServer, everything: str
) -> None:
    register(
        server,
        name="everything",
        transport="http",
        url=everything,
        allowed_tools=["trigger-long-running-operation", "get-sum", "echo"],
    )
    _, http = user_client(server, "everything-user")
    with http:
        events = turn(http, "Q-HANG run the long operation", "hang")
        (execution,) = events["execution"]
        assert not execution["ok"]
        assert "did not answer trigger-long-running-operation within 4 s" in execution["error"]
        assert events["final"][0]["text"] == "The operation took too long."
        # The server still answers its other tools, over the same link.
        events = turn(http, "Q-SUM add two and three", "sum")
        assert events["execution"][0]["stdout"] == "The sum of 2 and 3 is 5."
        assert events["final"][0]["text"] == "The sum is 5."
        events = turn(http, "Q-BIG echo a long text", "big")
    stdout = events["execution"][0]["stdout"]
    assert stdout.startswith("Echo: xxx") and stdout.endswith("(cut at 8000 characters)")
    assert len(stdout) < 8100
    assert events["final"][0]["text"] == "It was long."


def test_the_agent_lists_a_databases_tables_over_mcp_then_analyses_a_query_in_python(
    server: LiveServer,
) -> None:
    """Deleting the server then stops its process."""
    database = shop_database(server.data_dir.parent)
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE sales (region TEXT, amount INTEGER)")
        db.executemany(
            "INSERT INTO sales VALUES (?, ?)", [("north", 25), ("south", 45), ("east", 20)]
        )
    registered = register(
        server,
        name="sqlite",
        transport="stdio",
        command=sqlite_server_command(database)[:1],  # the operator's pinned arguments
        allowed_tools=["list_tables", "read_query"],
    )
    _, http = user_client(server, "sqlite-user")
    with http:
        events = turn(http, "Q-SQL what is the total amount sold?", "sql")
    tools = [call["tool"] for call in events["tool_call"]]
    assert tools == ["sqlite__list_tables", "sqlite__read_query", "python_coder"]
    assert "sales" in events["execution"][0]["stdout"]
    assert events["execution"][-1]["stdout"] == "total amount: 90\n"
    (final,) = events["final"]
    assert final["text"] == "The total amount is 90."
    (citation,) = final["citations"]
    assert (
        citation["kind"] == "computed" and citation["run_id"] == events["execution"][-1]["run_id"]
    )
    (process,) = children(server, "mcp-server-sqlite")
    with server.client() as admin:
        assert admin.delete(f"/api/mcp-servers/{registered['id']}").status_code == 204
    wait_for(lambda: gone(process))


def test_admins_alone_manage_servers_and_secrets_never_come_back(
    server: LiveServer, everything: str
) -> None:
    created = register(
        server,
        name="secretive",
        transport="http",
        url=everything,
        secrets={"Authorization": SECRET},
    )
    assert created["secret_names"] == ["Authorization"] and SECRET not in str(created)
    with server.client() as admin:
        listed = admin.get("/api/mcp-servers")
        assert listed.status_code == 200 and SECRET not in listed.text
        assert "secretive" in listed.text
        # A change's secrets join those kept; an empty value removes one.
        url = f"/api/mcp-servers/{created['id']}"
        more = admin.patch(url, json={"secrets": {"X-Team": "data"}})
        assert more.json()["secret_names"] == ["Authorization", "X-Team"]
        fewer = admin.patch(url, json={"secrets": {"X-Team": ""}})
        assert fewer.json()["secret_names"] == ["Authorization"]
        tools = admin.get(f"/api/mcp-servers/{created['id']}/tools")
        assert tools.status_code == 200, tools.text
        names = {t["name"]: t for t in tools.json()["tools"]}
        assert names["get-sum"]["agent_name"] == "secretive__get-sum"
        assert not names["get-sum"]["allowed"]
        # Wrong input, a taken name, unknown and deleted ids: clear refusals, never a 500.
        assert admin.post("/api/mcp-servers", json={"name": "Bad Name", "transport": "http",
                          "url": everything}).status_code == 422  # fmt: skip
        no_url = admin.post("/api/mcp-servers", json={"name": "nourl", "transport": "http"})
        assert no_url.status_code == 422 and "url" in no_url.text
        taken = admin.post("/api/mcp-servers", json={"name": "secretive", "transport": "http",
                           "url": everything})  # fmt: skip
        assert taken.status_code == 409
        assert admin.patch("/api/mcp-servers/999999", json={"enabled": False}).status_code == 404
        for traversal in ("..%2F1", "1%2F..%2F..", "-1"):  # ids are numbers, nothing else
            assert admin.get(f"/api/mcp-servers/{traversal}/tools").status_code in (404, 422)
        # A stdio server runs only a program the operator listed (MCP_STDIO_PROGRAMS).
        shell = admin.post("/api/mcp-servers", json={"name": "shell", "transport": "stdio",
                           "command": ["/bin/sh", "-c", "id"]})  # fmt: skip
        assert shell.status_code == 422 and "MCP_STDIO_PROGRAMS" in shell.text
        assert admin.delete(f"/api/mcp-servers/{created['id']}").status_code == 204
        assert admin.delete(f"/api/mcp-servers/{created['id']}").status_code == 404
        assert admin.get(f"/api/mcp-servers/{created['id']}/tools").status_code == 404
        gone = admin.post("/api/mcp-servers", json={"name": "down", "transport": "http",
                          "url": "http://127.0.0.1:9/mcp"})  # fmt: skip
        down = admin.get(f"/api/mcp-servers/{gone.json()['id']}/tools")
        assert down.status_code == 200 and down.json()["tools"] == []
        assert "could not be reached" in down.json()["error"]
    # The database holds the secret sealed, never in the clear.
    assert SECRET.encode() not in (server.data_dir / "app.db").read_bytes()
    _, http = user_client(server, "not-an-admin")
    with http:
        assert http.get("/api/mcp-servers").status_code == 403
        assert http.post("/api/mcp-servers", json={"name": "mine", "transport": "stdio",
                         "command": ["/bin/sh"]}).status_code == 403  # fmt: skip
        assert http.delete(f"/api/mcp-servers/{gone.json()['id']}").status_code == 403
