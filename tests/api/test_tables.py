"""Issue 27: a table a run showed, paged, sorted, filtered and downloaded through the API."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pandas as pd
import pytest

from tests.conftest import scripted_server
from tests.support.agent_script import sse_events
from tests.support.live_server import LiveServer
from tests.support.table_script import ROWS, expected_frame, table_turn


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("tables")
    replies = [*table_turn("Q-TABLE"), *table_turn("Q-TABLE-V1"), *table_turn("Q-TABLE-GONE")]
    with scripted_server(folder, replies, PYTHON_CODE_TIMEOUT="120") as live:
        with live.client() as admin:
            created = admin.post("/api/users", json={"username": "mallory", "password": "m" * 12})
        assert created.status_code == 201, created.text
        yield live


def _turn(server: LiveServer, tag: str, session: str) -> list[tuple[str, dict[str, Any]]]:
    body = {"message": f"{tag} show me the cities table", "session_id": session,
            "agent_type": "react", "stream": True}  # fmt: skip
    with server.client(timeout=300) as http, http.stream("POST", "/api/chat", json=body) as reply:
        assert reply.status_code == 200
        return list(sse_events(reply.iter_lines()))


@pytest.fixture(scope="module")
def table(server: LiveServer) -> dict[str, Any]:
    events = _turn(server, "Q-TABLE", "tables")
    kinds = [name for name, _ in events]
    assert kinds[kinds.index("execution") + 1] == "table", kinds  # right after its run
    return next(data for name, data in events if name == "table")


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return expected_frame()


@pytest.fixture(scope="module")
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client(timeout=120) as client:
        yield client


def _rows(http: httpx.Client, url: str, **params: Any) -> dict[str, Any]:
    response = http.get(f"{url}/rows", params=params)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_the_event_carries_the_first_rows(table: dict[str, Any], frame: pd.DataFrame) -> None:
    assert table["rows"] == ROWS and table["source"] == "expression" and table["name"] == "big"
    assert [c["name"] for c in table["columns"]] == ["id", "x", "city", "k"]
    assert table["columns"][0]["type"] == "int64"
    assert table["preview"] == frame.head(20).to_numpy().tolist()
    assert table["url"] == f"/api/sessions/tables/tables/{table['table_id']}"


def test_summary_and_first_page(http: httpx.Client, table: dict[str, Any]) -> None:
    summary = http.get(table["url"]).json()
    assert summary["rows"] == ROWS
    city = next(c for c in summary["columns"] if c["name"] == "city")
    assert city["type"] == "VARCHAR" and city["nulls"] == 0 and city["min"] == "Paris-Nord"
    k = next(c for c in summary["columns"] if c["name"] == "k")
    assert (k["min"], k["max"]) == (0, 999) and 400 < k["mean"] < 600
    page = _rows(http, table["url"], limit=20)
    assert page["total"] == ROWS and page["rows"] == table["preview"]


def test_page_5000_and_sorting_agree_with_pandas(
    http: httpx.Client, table: dict[str, Any], frame: pd.DataFrame
) -> None:
    page = _rows(http, table["url"], offset=4999 * 100, limit=100)
    assert page["rows"] == frame.iloc[499_900:500_000].to_numpy().tolist()
    for column, order in (("x", "desc"), ("city", "asc"), ("k", "desc")):
        page = _rows(http, table["url"], sort=column, order=order, offset=200, limit=50)
        expected = frame.sort_values(column, ascending=order == "asc", kind="stable")
        assert page["rows"] == expected.iloc[200:250].to_numpy().tolist(), column


def test_filters_agree_with_pandas(
    http: httpx.Client, table: dict[str, Any], frame: pd.DataFrame
) -> None:
    filters = [{"column": "city", "op": "contains", "value": "PARIS"},
               {"column": "k", "op": "gt", "value": "900"}]  # fmt: skip
    page = _rows(http, table["url"], filters=json.dumps(filters), sort="x", limit=100)
    chosen = frame[frame["city"].str.lower().str.contains("paris") & (frame["k"] > 900)]
    assert page["total"] == len(chosen)
    assert page["rows"] == chosen.sort_values("x", kind="stable").head(100).to_numpy().tolist()
    equal = [
        {"column": "city", "op": "eq", "value": "nice"},
        {"column": "x", "op": "le", "value": 0},
    ]
    page = _rows(http, table["url"], filters=json.dumps(equal), limit=1)
    assert page["total"] == int(((frame["city"] == "nice") & (frame["x"] <= 0)).sum())


def test_csv_and_parquet_downloads_match(
    http: httpx.Client, table: dict[str, Any], frame: pd.DataFrame
) -> None:
    csv = http.get(f"{table['url']}/download", params={"format": "csv"})
    assert csv.status_code == 200 and csv.headers["content-type"].startswith("text/csv")
    pd.testing.assert_frame_equal(pd.read_csv(io.BytesIO(csv.content)), frame)
    parquet = http.get(f"{table['url']}/download", params={"format": "parquet"})
    pd.testing.assert_frame_equal(pd.read_parquet(io.BytesIO(parquet.content)), frame)
    filters = json.dumps([{"column": "k", "op": "eq", "value": 7}])
    small = http.get(f"{table['url']}/download", params={"format": "xlsx", "filters": filters})
    assert small.status_code == 200, small.text
    sheet = pd.read_excel(io.BytesIO(small.content))
    pd.testing.assert_frame_equal(sheet, frame[frame["k"] == 7].reset_index(drop=True))


def test_bad_parameters_are_clear(http: httpx.Client, table: dict[str, Any]) -> None:
    url = f"{table['url']}/rows"
    cases = {
        (("sort", "nope"),): 400,
        (("filters", json.dumps([{"column": "k", "op": "gt", "value": "many"}])),): 400,
        (("filters", json.dumps([{"column": "nope", "op": "eq", "value": 1}])),): 400,
        (("filters", json.dumps([{"column": "k", "op": "like", "value": 1}])),): 422,
        (("filters", "not json"),): 422,
        (("limit", "100000"),): 422,
        (("offset", "-1"),): 422,
        (("order", "sideways"),): 422,
    }
    for params, status in cases.items():
        response = http.get(url, params=dict(params))
        assert response.status_code == status, (params, response.text)
        assert response.json()["detail"]
    far = _rows(http, table["url"], offset=ROWS + 10)
    assert far["rows"] == [] and far["total"] == ROWS


def test_others_and_traversal_get_404(server: LiveServer, table: dict[str, Any]) -> None:
    with server.client(server.token("mallory", "m" * 12)) as mallory:
        assert mallory.get(table["url"]).status_code == 404
        assert mallory.get(f"{table['url']}/rows").status_code == 404
        assert mallory.get(f"{table['url']}/download").status_code == 404
    base = table["url"].rsplit("/", 1)[0]
    with server.client() as http:
        for bad in ("0123456789ab_1", "..", "..%2F..%2Fvariables%2Fbig", "ABCDEF012345_1",
                    "0123456789ab_1.parquet", "%2e%2e"):  # fmt: skip
            assert http.get(f"{base}/{bad}").status_code == 404, bad
            assert http.get(f"{base}/{bad}/rows").status_code == 404, bad


def test_v1_clients_get_the_table_as_metadata(server: LiveServer) -> None:
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    completion = client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "Q-TABLE-V1 show me the cities table"}],
        extra_body={"agent_type": "react"},
        timeout=300,
    )
    assert str(completion.choices[0].message.content).startswith("Here is the table of cities.")
    metadata: Any = completion.metadata
    (table,) = metadata["tables"]
    assert table["rows"] == ROWS and table["url"].startswith("/api/sessions/")
    assert table["preview"][0][0] == 0


def test_a_deleted_session_has_no_table(server: LiveServer, tmp_path: Path) -> None:
    events = _turn(server, "Q-TABLE-GONE", "gone")
    table = next(data for name, data in events if name == "table")
    final = next(data for name, data in events if name == "final")
    with server.client() as http:
        assert http.get(table["url"]).status_code == 200
        deleted = http.delete(f"/api/conversations/{final['conversation_id']}")
        assert deleted.status_code == 204
        assert http.get(table["url"]).status_code == 404


def test_the_notebook_export_shows_the_table_as_a_dataframe_output(
    http: httpx.Client, table: dict[str, Any]
) -> None:
    exported = http.get("/api/sessions/tables/export", params={"format": "ipynb"})
    assert exported.status_code == 200, exported.text
    notebook = json.loads(exported.text)
    (cell,) = [c for c in notebook["cells"] if "default_rng(7)" in "".join(c["source"])]
    assert "".join(cell["source"]).rstrip().endswith("big")  # the code reruns as it ran
    (result,) = [o for o in cell["outputs"] if o["output_type"] == "execute_result"]
    text = "".join(result["data"]["text/plain"])
    assert "[1000000 rows x 4 columns]" in text and "Paris-Nord" in text
    streams = "".join("".join(o["text"]) for o in cell["outputs"] if o["output_type"] == "stream")
    assert "rows x 4 columns" not in streams  # shown once, as the value
