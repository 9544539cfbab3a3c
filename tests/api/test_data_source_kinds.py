"""Data sources of the other kinds (issue 43) on a live server: a real MariaDB (with an
account that may only read), and SQLite and DuckDB files uploaded through the Files API
and read in the confined helper. Each kind answers a join; each refuses writes, DDL and
reading or writing server files by itself; MariaDB stops a statement past its time."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import openai
import pytest

from tests.conftest import write_replies
from tests.support.mariadb import MariaDbServer
from tests.support.shared_server import SharedServer, SignedIn, module_server, own_user

JOIN = (
    "SELECT c.name, SUM(o.amount) AS total FROM orders o"
    " JOIN customers c ON c.id = o.customer_id GROUP BY c.name ORDER BY c.name"
)
SCHEMA = (
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT, region TEXT)",
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER REFERENCES customers(id),"
    " amount DOUBLE, placed DATE)",
    "INSERT INTO customers VALUES (1, 'Ada', 'north'), (2, 'Bo', 'south')",
    "INSERT INTO orders VALUES (1, 1, 10.5, '2026-01-01'), (2, 1, 20, '2026-01-02'),"
    " (3, 2, 7, '2026-01-03')",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    root = tmp_path_factory.mktemp("source-kinds")
    with module_server(
        root,
        SCRIPTED_REPLIES=write_replies(root / "replies.json", []),
        WORK_LIMITS=json.dumps({"source_query": {"seconds": 3}}),
    ) as live:
        yield live


@pytest.fixture
def user(server: SharedServer, request: pytest.FixtureRequest) -> SignedIn:
    return own_user(server, request)


@pytest.fixture(scope="module")
def shop(mariadb_server: MariaDbServer) -> dict[str, Any]:
    database = mariadb_server.new_database()
    mariadb_server.execute(database, *SCHEMA)
    username, password = mariadb_server.read_only_user(database)
    return {
        "kind": "mysql",
        "host": mariadb_server.host,
        "port": mariadb_server.port,
        "database": database,
        "username": username,
        "password": password,
    }


def _register(user: SignedIn, **body: Any) -> httpx.Response:
    with user.client(timeout=60) as http:
        return http.post("/api/data-sources", json={"name": "shop", **body})


def _query(user: SignedIn, source_id: str, sql: str) -> httpx.Response:
    with user.client(timeout=60) as http:
        return http.post(f"/api/data-sources/{source_id}/query", json={"sql": sql})


def _upload(user: SignedIn, path: Path) -> str:
    with openai.OpenAI(base_url=f"{user.url}/v1", api_key=user.token(), max_retries=0) as sdk:
        return sdk.files.create(file=(path.name, path.read_bytes()), purpose="user_data").id


def _answers_the_join(user: SignedIn, source: dict[str, Any]) -> None:
    tables = {table["name"] for table in source["catalog"]}
    assert {"customers", "orders"} <= tables
    answered = _query(user, source["id"], JOIN)
    assert answered.status_code == 200, answered.text
    assert answered.json()["rows"] == [["Ada", 30.5], ["Bo", 7.0]]


def _refuses(user: SignedIn, source_id: str, refusals: dict[str, str]) -> None:
    for sql, said in refusals.items():
        refused = _query(user, source_id, sql)
        assert refused.status_code == 400, (sql, refused.text)
        assert said in refused.json()["detail"], (sql, refused.json()["detail"])


def test_mariadb_answers_a_join_and_refuses_what_is_not_reading(
    user: SignedIn, shop: dict[str, Any], mariadb_server: MariaDbServer
) -> None:
    made = _register(user, **shop)
    assert made.status_code == 201, made.text
    source = made.json()
    _answers_the_join(user, source)
    (orders,) = [t for t in source["catalog"] if t["name"] == "orders"]
    columns = {c["name"]: c for c in orders["columns"]}
    assert (
        columns["id"]["key"] == "primary" and columns["customer_id"]["references"] == "customers.id"
    )
    _refuses(
        user,
        source["id"],
        {
            "DELETE FROM orders": "DELETE command denied",
            "DROP TABLE orders": "READ ONLY transaction",
            "CREATE TABLE extra (a INT)": "READ ONLY transaction",
            "SELECT 1 INTO OUTFILE '/tmp/pwned'": "FILE privilege",
            "LOAD DATA LOCAL INFILE '/etc/hostname' INTO TABLE orders": "",
            "SELECT 1; DROP TABLE orders": "syntax",
        },
    )
    # Reading a server file needs FILE: the database gives nothing back.
    assert _query(user, source["id"], "SELECT LOAD_FILE('/etc/hostname') AS f").json()["rows"] == [
        [None]
    ]
    mariadb_server.execute(shop["database"], "SELECT 1")  # the server is still there
    rows = _query(user, source["id"], "SELECT COUNT(*) AS n FROM orders").json()["rows"]
    assert rows == [[3]]


def test_mariadb_refuses_a_write_the_account_may_make_in_its_read_only_transaction(
    user: SignedIn, shop: dict[str, Any], mariadb_server: MariaDbServer
) -> None:
    """An account granted writes on the database (not on every database, which is
    refused): the read-only transaction still stops them."""
    username, password = mariadb_server.read_only_user(shop["database"])
    mariadb_server.execute(
        shop["database"],
        f"GRANT INSERT, DELETE ON {shop['database']}.* TO '{username}'@'127.0.0.1'",
    )
    made = _register(user, **{**shop, "username": username, "password": password})
    assert made.status_code == 201, made.text
    _refuses(
        user,
        made.json()["id"],
        {
            "DELETE FROM orders": "READ ONLY transaction",
            "INSERT INTO customers VALUES (3, 'Cy', 'east')": "READ ONLY transaction",
        },
    )


def test_mariadb_stops_a_statement_past_its_time(user: SignedIn, shop: dict[str, Any]) -> None:
    source = _register(user, **shop).json()
    stopped = _query(user, source["id"], "SELECT SLEEP(30) AS s, COUNT(*) FROM orders")
    assert stopped.status_code == 400
    assert "max_statement_time" in stopped.json()["detail"]


def test_an_account_that_may_write_is_refused(
    user: SignedIn, shop: dict[str, Any], mariadb_server: MariaDbServer
) -> None:
    body = {**shop, "username": mariadb_server.user, "password": mariadb_server.password}
    refused = _register(user, **body)
    assert refused.status_code == 422
    assert "only read" in refused.json()["detail"] and "FILE" in refused.json()["detail"]


def test_a_sqlite_file_answers_a_join_and_refuses_writes(user: SignedIn, tmp_path: Path) -> None:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as connection:
        for statement in SCHEMA:
            connection.execute(statement.replace("DOUBLE", "REAL"))
    made = _register(user, kind="sqlite", file_id=_upload(user, path))
    assert made.status_code == 201, made.text
    _answers_the_join(user, made.json())
    _refuses(
        user,
        made.json()["id"],
        {
            "DELETE FROM orders": "readonly",
            "DROP TABLE orders": "readonly",
            "ATTACH DATABASE '/tmp/other.db' AS other": "too many attached",
        },
    )


def test_a_duckdb_file_answers_a_join_and_refuses_files_and_writes(
    user: SignedIn, tmp_path: Path
) -> None:
    path = tmp_path / "shop.duckdb"
    with duckdb.connect(str(path)) as connection:
        for statement in SCHEMA:
            connection.execute(statement)
    made = _register(user, kind="duckdb", file_id=_upload(user, path))
    assert made.status_code == 201, made.text
    _answers_the_join(user, made.json())
    _refuses(
        user,
        made.json()["id"],
        {
            "DELETE FROM orders": "read-only",
            "CREATE TABLE extra (a INT)": "read-only",
            "SELECT * FROM read_csv('/etc/passwd')": "disabled",
            "COPY orders TO '/tmp/pwned.csv'": "",
            "SET enable_external_access = true": "",
        },
    )


def test_another_users_file_is_not_found(
    server: SharedServer, user: SignedIn, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    path = tmp_path / "mine.sqlite"
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE t (a INTEGER)")
    file_id = _upload(user, path)
    other = own_user(server, request)
    refused = _register(other, kind="sqlite", file_id=file_id)
    assert refused.status_code == 404


def test_uploaded_files_become_a_dataset_that_answers_a_join(
    user: SignedIn, tmp_path: Path
) -> None:
    customers = tmp_path / "Customers 2026.csv"
    customers.write_text("id,name,region\n1,Ada,north\n2,Bo,south\n")
    orders = tmp_path / "orders.parquet"
    with duckdb.connect() as connection:
        connection.execute(
            "COPY (SELECT * FROM (VALUES (1, 1, 10.5, DATE '2026-01-01'), (2, 1, 20.0, DATE"
            " '2026-01-02'), (3, 2, 7.0, DATE '2026-01-03')) t(id, customer_id, amount, placed))"
            f" TO '{orders}' (FORMAT parquet)"
        )
    made = _register(
        user, kind="dataset", file_ids=[_upload(user, customers), _upload(user, orders)]
    )
    assert made.status_code == 201, made.text
    source = made.json()
    assert {t["name"]: t["rows"] for t in source["catalog"]} == {"customers_2026": 2, "orders": 3}
    answered = _query(
        user,
        source["id"],
        "SELECT c.name, SUM(o.amount) AS total FROM orders o"
        " JOIN customers_2026 c ON c.id = o.customer_id GROUP BY c.name ORDER BY c.name",
    )
    assert answered.status_code == 200, answered.text
    assert answered.json()["rows"] == [["Ada", 30.5], ["Bo", 7.0]]
    _refuses(user, source["id"], {"DELETE FROM orders": "read-only"})
    document = tmp_path / "notes.md"
    document.write_text("# not a table")
    refused = _register(user, name="notes", kind="dataset", file_ids=[_upload(user, document)])
    assert refused.status_code == 422 and "a dataset is made of" in refused.json()["detail"]
