"""Data sources (issue 43) on a live server, against a real PostgreSQL: registering one
with a read-only role, the database refusing writes, DDL and server-side file and program
functions, the statement timeout, a scripted agent answering from a join with `sql()` in
the sandbox, the fix step using the catalog's names, the sandbox kept off the database's
port, and a second user who can neither see nor change what is not shared with them."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import openai
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from tests.conftest import StartServer, write_replies
from tests.support.agent_script import react_turn, sse_events
from tests.support.live_server import LiveServer
from tests.support.postgres import PostgresServer
from tests.support.shared_server import SharedServer, SignedIn, module_server, own_user
from tests.support.shop_database import shop_database

JOIN = (
    "SELECT c.name, SUM(o.amount) AS total FROM orders o"
    " JOIN customers c ON c.id = o.customer_id GROUP BY c.name ORDER BY c.name"
)
JOIN_CODE = (
    f"df = sql('shop', {JOIN!r})\nprint('total for Ada:', float(df['total'][0]))\n"
    "print('type:', df['total'].dtype)\n"
)
TYPO_CODE = "df = sql('shop', 'SELECT SUM(amont) AS s FROM orders')\nprint('sum:', df['s'][0])\n"
FIXED_CODE = (
    "df = sql('shop', 'SELECT SUM(amount) AS s FROM orders')\nprint('sum:', float(df['s'][0]))\n"
)
PORT_CODE = (
    "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
    "    print('REACHED')\nexcept OSError as exc:\n    print('unreachable:', type(exc).__name__)\n"
)
GONE_CODE = "df = sql('shop', 'SELECT 1 AS one')\nprint(df)\n"


@pytest.fixture(scope="module")
def database(postgres_server: PostgresServer) -> dict[str, Any]:
    """A shop database, and a role that may only read it."""
    return shop_database(postgres_server)


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, database: dict[str, Any]
) -> Iterator[SharedServer]:
    root = tmp_path_factory.mktemp("data-sources")
    replies = [
        *react_turn("Q-JOIN", JOIN_CODE, "Ada spent 30.5 in all."),
        *react_turn("Q-PORT", PORT_CODE.format(port=database["port"]), "It is unreachable."),
        *react_turn("Q-GONE", GONE_CODE, "Done."),
        *react_turn("Q-VERIFY", JOIN_CODE, "Ada spent 30.5 in all."),
        # Scripted only for a prompt that offers the verified answer as an example.
        {
            "when": ["[stage: react]", "Q-SIMILAR"],
            "content": "Action: coder\nAction Input: Q-SIMILAR",
        },
        {
            "when": [
                "[stage: generate]",
                "Q-SIMILAR",
                "Verified answers to similar questions",
                JOIN,
            ],
            "content": f"```python\n{JOIN_CODE}```",
        },
        {"when": ["[stage: answer]", "Q-SIMILAR"], "content": "Ada spent 30.5."},
        # Another user's turn writes the same code, but is offered no example.
        *react_turn("Q-OTHER", JOIN_CODE, "Ada spent 30.5."),
        *react_turn("Q-V1", JOIN_CODE, "Ada spent 30.5 in all."),
        # The agent proposes a note, then answers once it is told it was proposed.
        {
            "when": ["[stage: react]", "Q-NOTE"],
            "content": "Thought: the amount's unit matters\nAction: note_data\n"
            "Action Input: shop orders.amount: the order's total in EUR, VAT included",
        },
        {
            "when": ["[stage: react]", "Q-NOTE", "Proposed to the owner of shop"],
            "content": "Final Answer: I proposed a note on orders.amount.",
        },
        # The typo fails; the fix is scripted only for a prompt that carries the catalog's name.
        *react_turn("Q-TYPO", TYPO_CODE, "The orders sum to 37.5."),
        {
            "when": ["[stage: fix]", "Q-TYPO", "orders.amount"],
            "content": f"```python\n{FIXED_CODE}```",
        },
    ]
    with module_server(
        root,
        SCRIPTED_REPLIES=write_replies(root / "replies.json", replies),
        WORK_LIMITS=json.dumps({"source_query": {"seconds": 3}}),
        AST_PREFILTER="false",  # the port test's socket: only the OS sandbox stands in the way
    ) as live:
        yield live


@pytest.fixture
def user(server: SharedServer, request: pytest.FixtureRequest) -> SignedIn:
    return own_user(server, request)


def _register(user: SignedIn, database: dict[str, Any], **changes: Any) -> dict[str, Any]:
    body = {
        "name": "shop",
        "kind": "postgresql",
        "host": database["host"],
        "port": database["port"],
        "database": database["database"],
        "username": database["username"],
        "password": database["password"],
        **changes,
    }
    with user.client() as http:
        made = http.post("/api/data-sources", json=body)
    assert made.status_code == 201, made.text
    return dict(made.json())


def _query(user: SignedIn, source_id: str, sql: str) -> Any:
    with user.client(timeout=60) as http:
        return http.post(f"/api/data-sources/{source_id}/query", json={"sql": sql})


def _chat(user: SignedIn, session: str, message: str) -> dict[str, dict[str, Any]]:
    body = {"message": message, "session_id": session, "stream": True}
    with user.client(timeout=180) as http, http.stream("POST", "/api/chat", json=body) as reply:
        assert reply.status_code == 200, reply.read()
        return dict(sse_events(reply.iter_lines()))


def _attach(user: SignedIn, session: str, *source_ids: str) -> Any:
    with user.client() as http:
        return http.put(
            f"/api/sessions/{session}/data-sources", json={"source_ids": list(source_ids)}
        )


def test_a_source_is_registered_with_its_catalog_and_no_password_shown(
    user: SignedIn, database: dict[str, Any]
) -> None:
    source = _register(user, database)
    assert source["has_password"] and "password" not in source
    assert database["password"] not in json.dumps(source)
    tables = {table["name"]: table for table in source["catalog"]}
    assert set(tables) == {"customers", "orders"}
    columns = {c["name"]: c for c in tables["orders"]["columns"]}
    assert columns["id"]["key"] == "primary"
    assert columns["customer_id"]["references"] == "customers.id"
    assert {"Ada", "Bo"} <= set(
        {c["name"]: c for c in tables["customers"]["columns"]}["name"]["samples"]
    )


def test_a_superuser_account_is_refused(user: SignedIn, database: dict[str, Any]) -> None:
    body = {
        "name": "powerful",
        "kind": "postgresql",
        "host": database["host"],
        "port": database["port"],
        "database": database["database"],
        "username": database["superuser"],
        "password": database["superuser_password"],
    }
    with user.client() as http:
        refused = http.post("/api/data-sources", json=body)
        assert refused.status_code == 422
        assert "superuser" in refused.json()["detail"] and "read" in refused.json()["detail"]
        assert http.get("/api/data-sources").json() == []  # nothing was kept


def test_the_database_refuses_writes_ddl_and_server_functions(
    user: SignedIn, database: dict[str, Any]
) -> None:
    source = _register(user, database)
    refusals = {
        "DELETE FROM orders": "read-only transaction",
        "DROP TABLE orders": "read-only transaction",
        "CREATE TABLE extra (a int)": "read-only transaction",
        "SELECT pg_read_file('/etc/hostname')": "permission denied",
        "COPY orders TO PROGRAM 'touch /tmp/pwned'": "pg_execute_server_program",
        "SELECT 1; DROP TABLE orders": "multiple commands",
    }
    for sql, said in refusals.items():
        refused = _query(user, source["id"], sql)
        assert refused.status_code == 400, (sql, refused.text)
        assert refused.json()["code"] == "query_failed" and said in refused.json()["detail"], sql
    with psycopg.connect(database["url"]) as connection:
        assert connection.execute("SELECT count(*) FROM orders").fetchone() == (3,)
    answered = _query(user, source["id"], "SELECT name FROM customers ORDER BY id")
    assert answered.status_code == 200
    assert answered.json()["rows"] == [["Ada"], ["Bo"]]


def test_an_account_that_may_write_still_meets_a_read_only_transaction(
    user: SignedIn, database: dict[str, Any]
) -> None:
    """Granted DELETE on a table, the account still cannot delete: each query has its own
    read-only transaction, whatever the one before it ended or set."""
    role, password = f"writer_{secrets.token_hex(4)}", secrets.token_urlsafe(12)
    with psycopg.connect(database["url"], autocommit=True) as connection:
        connection.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        connection.execute(f"GRANT SELECT, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
    source = _register(user, database, name="writable", username=role, password=password)
    for sql in ("COMMIT", "SET default_transaction_read_only = off", "SET statement_timeout = 0"):
        _query(user, source["id"], sql)  # whatever they do, they end with their transaction
    refused = _query(user, source["id"], "DELETE FROM orders")
    assert refused.status_code == 400 and "read-only transaction" in refused.json()["detail"]
    with psycopg.connect(database["url"]) as connection:
        assert connection.execute("SELECT count(*) FROM orders").fetchone() == (3,)


def test_a_statement_past_the_timeout_is_stopped(user: SignedIn, database: dict[str, Any]) -> None:
    source = _register(user, database)
    stopped = _query(user, source["id"], "SELECT pg_sleep(30)")
    assert stopped.status_code == 400
    assert "statement timeout" in stopped.json()["detail"]
    with psycopg.connect(database["url"]) as connection:  # nothing is left running there
        running = connection.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(30)%'"
            " AND pid <> pg_backend_pid() AND state = 'active'"
        ).fetchone()
    assert running == (0,)


def test_a_scripted_agent_answers_from_a_join_citing_the_query(
    user: SignedIn, database: dict[str, Any]
) -> None:
    source = _register(user, database)
    assert _attach(user, "join", source["id"]).status_code == 200
    events = _chat(user, "join", "Q-JOIN compute the total each customer spent")
    execution = events["execution"]
    assert execution["ok"], execution
    assert "[query q1 on shop: 2 rows]" in execution["stdout"]
    assert "total for Ada: 30.5" in execution["stdout"]
    assert "type: float64" in execution["stdout"]  # NUMERIC as a float, for arithmetic
    table = events["table"]  # the timeline shows the query's rows
    assert table["name"] == "df" and table["rows"] == 2
    assert [column["name"] for column in table["columns"]] == ["name", "total"]
    final = events["final"]
    (citation,) = [c for c in final["citations"] if c["text"] == "30.5"]
    assert citation["output_line"] == "total for Ada: 30.5"
    assert JOIN in citation["code"]  # the number is cited to the run and its query


def test_an_unknown_column_is_fixed_with_the_catalogs_names(
    user: SignedIn, database: dict[str, Any]
) -> None:
    source = _register(user, database)
    _attach(user, "typo", source["id"])
    events = _chat(user, "typo", "Q-TYPO compute the sum of the orders")
    assert events["execution"]["ok"] and "sum: 37.5" in events["execution"]["stdout"]
    assert events["final"]["text"] == "The orders sum to 37.5."


def test_the_sandbox_cannot_reach_the_databases_port(
    user: SignedIn, database: dict[str, Any]
) -> None:
    source = _register(user, database)
    _attach(user, "port", source["id"])
    events = _chat(user, "port", "Q-PORT compute whether code reaches the database")
    stdout = events["execution"]["stdout"]
    assert "unreachable:" in stdout and "REACHED" not in stdout


def test_a_second_user_cannot_see_or_change_a_source(
    server: SharedServer, user: SignedIn, database: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    source = _register(user, database)
    other = own_user(server, request)
    source_id = source["id"]
    with other.client() as http:
        assert http.get("/api/data-sources").json() == []
        assert http.get("/api/sessions/never-started/data-sources").json() == []
        assert http.get(f"/api/data-sources/{source_id}").status_code == 404
        assert _attach(other, "theirs", source_id).status_code == 404
        assert _query(other, source_id, "SELECT 1").status_code == 404
        # A made-up id, and traversals (encoded: a client would resolve a bare '..').
        for made_up in ("ds_" + "0" * 24, "..", "..%2F..%2Fetc%2Fpasswd", "ds_%2e%2e"):
            assert http.get(f"/api/data-sources/{made_up}").status_code == 404, made_up
            assert _query(other, made_up, "SELECT 1").status_code == 404, made_up
            refused = _attach(other, "theirs", made_up)
            assert refused.status_code == 404, made_up
    # Shared read-only: they may read and query it, never change, share or delete it.
    with user.client() as http:
        shared = http.put(f"/api/data-sources/{source_id}/shares", json={"users": [other.username]})
        assert shared.status_code == 200 and shared.json()["shared_with"] == [other.username]
    with other.client() as http:
        (listed,) = http.get("/api/data-sources").json()
        assert listed["id"] == source_id and not listed["owned"] and listed["shared_with"] == []
        assert _query(other, source_id, "SELECT count(*) AS n FROM orders").json()["rows"] == [[3]]
        assert (
            http.patch(f"/api/data-sources/{source_id}", json={"host": "evil.example"}).status_code
            == 403
        )
        assert http.delete(f"/api/data-sources/{source_id}").status_code == 403
        assert (
            http.put(f"/api/data-sources/{source_id}/shares", json={"users": []}).status_code == 403
        )
        everyone = http.put(f"/api/data-sources/{source_id}/shares", json={"everyone": True})
        assert everyone.status_code == 403
        assert _attach(other, "theirs", source_id).status_code == 200
    # A source deleted is gone from every conversation that attached it.
    with user.client() as http:
        assert http.delete(f"/api/data-sources/{source_id}").status_code == 204
    with other.client() as http:
        assert http.get("/api/sessions/theirs/data-sources").json() == []
        assert http.get(f"/api/data-sources/{source_id}").status_code == 404


def test_a_deleted_source_is_gone_from_a_run(user: SignedIn, database: dict[str, Any]) -> None:
    source = _register(user, database)
    _attach(user, "gone", source["id"])
    with user.client() as http:
        assert http.delete(f"/api/data-sources/{source['id']}").status_code == 204
    events = _chat(user, "gone", "Q-GONE compute it with SQL")
    execution = events["execution"]
    assert not execution["ok"] and "no data source 'shop' is attached" in execution["error"]


def test_a_password_is_sent_only_to_the_host_it_was_given_for(
    user: SignedIn, database: dict[str, Any]
) -> None:
    source = _register(user, database)
    with user.client(timeout=60) as http:
        # The same server under another name: without its password, the database refuses,
        # so the stored one was not sent; and the source is left as it was.
        moved = http.patch(f"/api/data-sources/{source['id']}", json={"host": "localhost"})
        assert moved.status_code == 422 and "could not be read" in moved.json()["detail"]
        kept = http.get(f"/api/data-sources/{source['id']}").json()
        assert kept["host"] == database["host"] and kept["has_password"]
        given = {"host": "localhost", "password": database["password"]}
        moved = http.patch(f"/api/data-sources/{source['id']}", json=given)
    assert moved.status_code == 200, moved.text
    assert moved.json()["host"] == "localhost" and moved.json()["has_password"]


def _asked(user: SignedIn, session: str, message: str) -> tuple[dict[str, Any], str, int]:
    """The turn's final event, its conversation and its answer's message id."""
    events = _chat(user, session, message)
    with user.client() as http:
        (conversation,) = [
            c for c in http.get("/api/conversations").json() if c["session_id"] == session
        ]
        answer = http.get(f"/api/conversations/{conversation['id']}").json()["messages"][-1]
    return events["final"], conversation["id"], answer["id"]


def test_a_verified_answer_is_offered_for_a_similar_question_and_only_to_those_who_see_it(
    server: SharedServer, user: SignedIn, database: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    source = _register(user, database)
    _attach(user, "verify", source["id"])
    _, conversation, answer = _asked(
        user, "verify", "Q-VERIFY compute the total each customer spent"
    )
    with user.client() as http:
        kept = http.post(f"/api/conversations/{conversation}/messages/{answer}/verified")
        assert kept.status_code == 201, kept.text
        (verified,) = kept.json()
        assert verified["source_id"] == source["id"] and verified["queries"] == [JOIN]
        assert verified["question"] == "Q-VERIFY compute the total each customer spent"
        again = http.post(f"/api/conversations/{conversation}/messages/{answer}/verified")
        assert [v["id"] for v in again.json()] == [verified["id"]]  # kept once
        listed = http.get(f"/api/data-sources/{source['id']}/verified-answers").json()
        assert [v["id"] for v in listed] == [verified["id"]]
    # A similar question in another conversation gets it as a worked example, and says so.
    _attach(user, "similar", source["id"])
    final, _, _ = _asked(user, "similar", "Q-SIMILAR compute the total spent by each customer")
    assert final["text"].startswith("Ada spent 30.5.")
    assert "reuses the query of a verified answer" in final["text"]
    # Someone who cannot see the source does not get it, even with the same code.
    other = own_user(server, request)
    theirs = _register(other, database)
    _attach(other, "other", theirs["id"])
    final, _, _ = _asked(other, "other", "Q-OTHER compute the total spent by each customer")
    assert final["text"] == "Ada spent 30.5."
    with other.client() as http:
        for theirs in (conversation, "..", "..%2F" + conversation):  # not theirs to mark
            url = f"/api/conversations/{theirs}/messages/{answer}/verified"
            assert http.post(url).status_code == 404, theirs
        assert http.get(f"/api/data-sources/{source['id']}/verified-answers").status_code == 404
        assert (
            http.delete(
                f"/api/data-sources/{source['id']}/verified-answers/{verified['id']}"
            ).status_code
            == 404
        )
    # The owner withdraws it.
    with user.client() as http:
        url = f"/api/data-sources/{source['id']}/verified-answers/{verified['id']}"
        assert http.delete(url).status_code == 204
        assert http.get(f"/api/data-sources/{source['id']}/verified-answers").json() == []


def test_an_openai_client_attaches_sources_with_the_extension_fields(
    server: SharedServer, user: SignedIn, database: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    source = _register(user, database)
    with openai.OpenAI(base_url=f"{user.url}/v1", api_key=user.token(), max_retries=0) as sdk:
        reply = sdk.chat.completions.create(
            model="scripted",
            messages=[{"role": "user", "content": "Q-V1 compute the total each customer spent"}],
            extra_body={"session_id": "v1", "data_sources": [source["id"]]},
        )
        assert reply.choices[0].message.content == "Ada spent 30.5 in all."
        with pytest.raises(openai.BadRequestError, match="session_id"):
            sdk.chat.completions.create(
                model="scripted",
                messages=[{"role": "user", "content": "Q-V1 again"}],
                extra_body={"data_sources": [source["id"]]},
            )
    other = own_user(server, request)
    with (
        openai.OpenAI(base_url=f"{other.url}/v1", api_key=other.token(), max_retries=0) as sdk,
        pytest.raises(openai.NotFoundError),
    ):
        sdk.responses.create(
            model="scripted",
            input="Q-V1 compute the total each customer spent",
            extra_body={"session_id": "theirs", "data_sources": [source["id"]]},
        )


def _mcp(user: SignedIn | LiveServer, *calls: tuple[str, dict[str, Any]]) -> list[CallToolResult]:
    with user.client() as http:
        key = str(http.post("/api/keys", json={"name": "mcp"}).json()["key"])

    async def session() -> list[CallToolResult]:
        client = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30.0, read=300.0)
        )
        transport = streamable_http_client(f"{user.url}/mcp", http_client=client)
        async with client, Client(transport) as mcp:
            return [await mcp.call_tool(name, arguments) for name, arguments in calls]

    return anyio.run(session)


def _text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def test_an_mcp_host_lists_reads_queries_and_attaches_sources(
    server: SharedServer, user: SignedIn, database: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    source = _register(user, database)
    listed, described, queried, attached, ran = _mcp(
        user,
        ("list_data_sources", {}),
        ("describe_data_source", {"source_id": source["id"], "question": "orders per customer"}),
        ("query_data_source", {"source_id": source["id"], "sql": JOIN}),
        ("attach_data_sources", {"session_id": "mcp", "source_ids": [source["id"]]}),
        ("run_python", {"session_id": "mcp", "code": JOIN_CODE}),
    )
    assert [s["name"] for s in listed.structured_content["sources"]] == ["shop"]  # type: ignore[index]
    assert "customer_id (integer; references customers.id" in _text(described)
    assert queried.structured_content["rows"] == [["Ada", 30.5], ["Bo", 7.0]]  # type: ignore[index]
    assert not attached.is_error and not ran.is_error
    assert "total for Ada: 30.5" in _text(ran)
    other = own_user(server, request)
    (refused,) = _mcp(other, ("query_data_source", {"source_id": source["id"], "sql": "SELECT 1"}))
    assert refused.is_error and "Data source not found" in _text(refused)


def test_an_agent_proposes_a_note_the_owner_accepts(
    user: SignedIn, database: dict[str, Any]
) -> None:
    source = _register(user, database)
    _attach(user, "note", source["id"])
    events = _chat(user, "note", "Q-NOTE compute nothing, note what orders.amount means")
    assert events["final"]["text"] == "I proposed a note on orders.amount."
    with user.client() as http:
        url = f"/api/data-sources/{source['id']}"
        (proposed,) = http.get(url).json()["notes"]
        assert proposed == {
            "target": "orders.amount",
            "note": "the order's total in EUR, VAT included",
            "status": "proposed",
        }
        assert http.post(f"{url}/notes/accept", json={"target": "orders.amount"}).status_code == 200
        detail = http.get(url).json()
    (orders,) = [t for t in detail["catalog"] if t["name"] == "orders"]
    (amount,) = [c for c in orders["columns"] if c["name"] == "amount"]
    assert amount["note"] == "the order's total in EUR, VAT included"
    assert [n["status"] for n in detail["notes"]] == ["accepted"]


def test_an_answer_larger_than_memory_allows_is_read_out_of_core(
    start_server: StartServer, database: dict[str, Any], tmp_path: Path
) -> None:
    """Past 40% of the run's memory, the answer lands as Parquet (here past the 50 MB file
    size limit too) and comes back as a DuckDB relation; the file goes with the run."""
    live = start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "replies.json", []),
        PYTHON_CODE_MAX_MEMORY="200",
    )
    with live.client() as http:
        body = {
            "name": "shop",
            "kind": "postgresql",
            **{k: database[k] for k in ("host", "port", "database", "username", "password")},
        }
        made = http.post("/api/data-sources", json=body)
        assert made.status_code == 201, made.text
    big = "SELECT g::bigint AS a, g::float8 AS b FROM generate_series(1, 6000000) g"
    code = f"rel = sql('shop', {big!r})\nprint(type(rel).__name__, rel.count('*').fetchall()[0][0])"
    attached, ran, files = _mcp(
        live,
        ("attach_data_sources", {"session_id": "big", "source_ids": [made.json()["id"]]}),
        ("run_python", {"session_id": "big", "code": code}),
        ("list_files", {"session_id": "big"}),
    )
    assert not attached.is_error
    assert not ran.is_error, _text(ran)
    assert "DuckDBPyRelation 6000000" in _text(ran)
    assert "[query q1 on shop: 6000000 rows]" in _text(ran)
    assert not any(".duckdb_spill" in f["path"] for f in files.structured_content["files"])  # type: ignore[index]


def test_a_source_shared_with_a_group_is_seen_by_its_members_only(
    server: SharedServer, user: SignedIn, database: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    source = _register(user, database)
    member, outsider = own_user(server, request), own_user(server, request)
    shares = f"/api/data-sources/{source['id']}/shares"
    with server.client(server.admin_token) as admin:
        made = admin.post("/api/groups", json={"name": f"analysts-{source['id'][-6:]}"})
        assert made.status_code == 201, made.text
        group = made.json()
        members = f"/api/groups/{group['id']}/members"
        with member.client() as http:
            member_id = http.get("/api/users/me").json()["id"]
        assert admin.post(members, json={"user_id": member_id}).status_code == 201
    with user.client() as http:  # not in the group: it is not theirs to share with
        refused = http.put(shares, json={"groups": [group["name"]]})
        assert refused.status_code == 422 and "no group" in refused.json()["detail"]
        owner_id = http.get("/api/users/me").json()["id"]
    with server.client(server.admin_token) as admin:
        assert admin.post(members, json={"user_id": owner_id}).status_code == 201
    with user.client() as http:
        shared = http.put(shares, json={"groups": [group["name"]]})
        assert shared.status_code == 200 and shared.json()["shared_groups"] == [group["name"]]
    with member.client() as http:
        assert [s["id"] for s in http.get("/api/data-sources").json()] == [source["id"]]
        assert (
            _query(member, source["id"], "SELECT count(*) AS n FROM customers").status_code == 200
        )
    with outsider.client() as http:
        assert http.get("/api/data-sources").json() == []
        assert http.get(f"/api/data-sources/{source['id']}").status_code == 404
    with server.client(server.admin_token) as admin:  # out of the group: gone at once
        assert admin.delete(f"{members}/{member_id}").status_code == 204
    with member.client() as http:
        assert http.get(f"/api/data-sources/{source['id']}").status_code == 404
