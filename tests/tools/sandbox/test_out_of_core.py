"""DuckDB in the sandbox: larger-than-memory work spills to the workspace disk, and
running out of memory says what to do instead (issue 11)."""

from __future__ import annotations

import errno
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from backend.files.model import LARGE_FILE_BYTES
from backend.tools.sandbox import out_of_core
from tests.security.helpers import client, close_clients, new_session, run, stdout, workspace
from tests.support.live_server import LiveServer


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("out_of_core")
    replies = base / "replies.json"
    replies.write_text("[]")
    live = LiveServer(
        base / "data",
        LLM_BACKEND="scripted",
        SCRIPTED_REPLIES=str(replies),
        ADMIN_PASSWORD="out-of-core-password",
        PYTHON_CODE_TIMEOUT="120",
        PYTHON_CODE_MAX_MEMORY="512",
        PYTHON_CODE_MAX_FILE_SIZE="5",  # DuckDB's spill files grow past it
    )
    live.start()
    try:
        yield live
    finally:
        close_clients()
        live.stop()


def spill_left(server: LiveServer, session: str) -> bool:
    return (workspace(server, session) / ".duckdb_spill").exists()


def test_duckdb_spills_past_memory_and_the_file_limit(server: LiveServer) -> None:
    sid = new_session("duck")
    # A run that succeeds first: the zygote it becomes passes its limits on.
    assert run(server, "x = 1", sid)["success"]
    code = (
        "import duckdb\n"
        "print(duckdb.sql(\"SELECT current_setting('memory_limit')\").fetchall()[0][0])\n"
        "duckdb.sql('CREATE TABLE t AS SELECT i, md5(i::VARCHAR) AS h FROM range(12000000) r(i)')\n"
        "print(duckdb.sql('SELECT max(size) FROM duckdb_temporary_files()').fetchall()[0][0])\n"
        "groups = duckdb.sql('SELECT i % 5000000 AS k, count(DISTINCT h) FROM t GROUP BY k')\n"
        "print(duckdb.sql('SELECT count(*) FROM groups').fetchall()[0][0])\n"
    )
    result = run(server, code, sid, http_timeout=180)
    assert result["success"], result
    limit, spilled, groups = stdout(result).splitlines()
    assert limit.endswith("MiB") and float(limit.split()[0]) < 512, limit
    assert int(spilled) > 5 * 1024 * 1024  # one spill file past PYTHON_CODE_MAX_FILE_SIZE
    assert groups == "5000000"
    assert not spill_left(server, sid)


def test_duckdb_runs_back_to_back_and_variables_survive(server: LiveServer) -> None:
    sid = new_session("duck")
    first = run(server, "import duckdb\nx = 41\nprint(duckdb.sql('SELECT 1').fetchall())", sid)
    assert first["success"], first
    # A process DuckDB ran in hangs if forked; the next run must not come from it.
    second = run(server, "import duckdb\nprint(duckdb.sql('SELECT 1').fetchall()[0][0] + x)", sid)
    assert second["success"], second
    assert stdout(second).strip() == "42"


def test_pandas_out_of_memory_suggests_duckdb_and_keeps_state(server: LiveServer) -> None:
    sid = new_session("oom")
    assert run(server, "x = 7", sid)["success"]
    bomb = "blocks = []\nwhile True:\n    blocks.append(b'x' * 10**7)"
    result = run(server, bomb, sid)
    assert not result["success"]
    assert "512 MB" in result["error"] and "DuckDB" in result["error"], result["error"]
    assert stdout(run(server, "print(x)", sid)).strip() == "7"


def test_duckdb_output_over_the_file_limit_is_removed(server: LiveServer) -> None:
    sid = new_session("duck")
    code = (
        "import duckdb\n"
        'duckdb.sql("COPY (SELECT i, i * 2 AS j FROM range(6000000) t(i))'
        " TO 'outputs/big.csv'\")\n"
    )
    result = run(server, code, sid)
    assert not result["success"]
    assert "outputs/big.csv" in result["error"] and "5 MB" in result["error"], result["error"]
    assert not (workspace(server, sid) / "outputs" / "big.csv").exists()
    assert "outputs/big.csv" not in result["data"]["files"]


@pytest.mark.parametrize(
    "error",
    [
        MemoryError(),
        OSError(errno.ENOMEM, "Cannot allocate memory"),
        type("OutOfMemoryException", (Exception,), {})(),  # duckdb's, by name
    ],
    ids=["MemoryError", "ENOMEM", "duckdb"],
)
def test_out_of_memory_errors_are_recognised(error: BaseException) -> None:
    assert out_of_core.out_of_memory(error)
    assert not out_of_core.out_of_memory(OSError(errno.ENOENT, "No such file"))


def test_a_large_upload_is_a_duckdb_relation_in_every_run(
    server: LiveServer, tmp_path: Path
) -> None:
    sid = new_session("large")
    source = tmp_path / "big.csv"
    duckdb.sql(
        "COPY (SELECT i % 1000 AS key, i AS amount, 'padding-text-' || i AS note"
        f" FROM range(3300000) t(i)) TO '{source}' (HEADER)"
    )
    assert source.stat().st_size > LARGE_FILE_BYTES
    with source.open("rb") as body:  # streamed from the file
        put = client(server).put(f"/api/sessions/{sid}/uploads/big.csv", content=body)
    assert put.status_code == 201, put.text
    first = client(server).post(
        "/api/tools/python_coder",
        json={
            "session_id": sid,
            "file_paths": {"uploads/big.csv": "sales"},
            "code": "print(type(sales).__name__, sales.aggregate('count(*)').fetchall()[0][0])",
        },
        timeout=120,
    )
    assert first.status_code == 200 and first.json()["success"], first.text
    assert first.json()["data"]["stdout"].split() == ["DuckDBPyRelation", "3300000"]
    # That run used DuckDB, so the next one starts from the saved variables: the relation
    # cannot be saved, and is opened again because the code names it.
    code = "import duckdb\nprint(duckdb.sql('SELECT max(key) FROM sales').fetchall())"
    second = run(server, code, sid)
    assert second["success"], second
    assert stdout(second).strip() == "[(999,)]"
