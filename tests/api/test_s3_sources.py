"""S3 sources against a real S3 server (SeaweedFS on 127.0.0.1): listing, metadata by ranged
reads, file_paths copied into the workspace by ETag, and every bad input (issue 11)."""

from __future__ import annotations

import io
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from tests.conftest import StartServer, write_replies
from tests.support.live_server import LiveServer
from tests.support.seaweedfs import S3Server

BUCKET = "lab"
ROWS = 200_000


def csv_body(factor: int) -> bytes:
    return b"trial,value\n" + b"".join(b"t%d,%d\n" % (i % 3, i * factor) for i in range(2000))


def parquet_body() -> bytes:
    table = pa.table({"id": list(range(ROWS)), "group": [f"g{i % 5}" for i in range(ROWS)]})
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=20_000)
    return out.getvalue()


@pytest.fixture(scope="module")
def bucket(s3_server: S3Server) -> S3Server:
    s3 = s3_server.client()
    s3.create_bucket(Bucket=BUCKET)
    s3.create_bucket(Bucket="private")
    s3.put_object(Bucket=BUCKET, Key="trial_1/data.csv", Body=csv_body(1))
    s3.put_object(Bucket=BUCKET, Key="trial_1/events.parquet", Body=parquet_body())
    s3.put_object(Bucket=BUCKET, Key="trial_1/readme.bin", Body=b"not a data file")
    s3.put_object(Bucket=BUCKET, Key="secret/other.csv", Body=b"a,b\n1,2\n")
    s3.put_object(Bucket="private", Key="x.csv", Body=b"a,b\n1,2\n")
    return s3_server


def settings(s3: S3Server, **more: str) -> dict[str, str]:
    return {
        "S3_ENDPOINT_URL": s3.endpoint,
        "S3_ACCESS_KEY_ID": s3.access_key,
        "S3_SECRET_ACCESS_KEY": s3.secret_key,
        "S3_REGION": s3.region,
        "S3_BUCKETS": f"{BUCKET}/trial_1",
        **more,
    }


@pytest.fixture
def server(start_server: StartServer, tmp_path: Path, bucket: S3Server) -> Iterator[LiveServer]:
    replies = [
        {
            "when": ["[stage: select_files]", "Q-S3"],
            "content": 'The values are in the trial CSV.\n{"files": [{"name": '
            '"s3://lab/trial_1/data.csv", "reason": "it holds the values"}]}',
        },
        {
            "when": ["[stage: generate]", "Q-S3"],
            "content": "```python\nprint('total', int(df1['value'].sum()))\n```",
        },
        {"when": ["[stage: answer]", "Q-S3"], "content": "The total is 1999000."},
    ]
    yield start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", replies),
        PYTHON_CODE_MAX_FILES_TO_SELECT="1",  # three files: the LLM picks one
        **settings(bucket),
    )


def by_name(files: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f["name"]: f for f in files}


def test_allowlisted_objects_are_listed_with_metadata_without_a_download(
    server: LiveServer,
) -> None:
    with server.client() as http:
        http.put("/api/sessions/s3a/uploads/local.csv", content=b"x,y\n1,2\n")
        listed = http.get("/api/files", params={"session_id": "s3a"})
        assert listed.status_code == 200, listed.text
        files = by_name(listed.json())
        assert list(files) == [
            "uploads/local.csv",
            "s3://lab/trial_1/data.csv",
            "s3://lab/trial_1/events.parquet",
        ]
        table = files["s3://lab/trial_1/data.csv"]
        assert [c["name"] for c in table["details"]["columns"]] == ["trial", "value"]
        assert table["details"]["sample_rows"][1] == ["t1", 1]
        events = files["s3://lab/trial_1/events.parquet"]
        assert events["details"]["rows"] == ROWS  # from the footer
        assert events["details"]["row_groups"] == ROWS // 20_000
        only = http.get("/api/files", params={"session_id": "s3a", "source": "s3"}).json()
        assert [f["name"] for f in only] == list(files)[1:]
        info = http.get(
            "/api/files/info",
            params={"session_id": "s3a", "name": "s3://lab/trial_1/events.parquet"},
        )
        assert info.status_code == 200 and info.json()["details"]["rows"] == ROWS
    assert not (server.data_dir / "scratch/u1-s3a/s3").exists()  # nothing was downloaded


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("s3://lab/secret/other.csv", 403),
        ("s3://private/x.csv", 403),
        ("s3://lab/trial_10/data.csv", 403),  # a prefix is a folder, not a string prefix
        ("s3://lab/trial_1/missing.csv", 404),
        ("s3://lab/trial_1/../secret/other.csv", 400),
    ],
)
def test_names_outside_the_allowlist_or_missing_are_refused(
    server: LiveServer, name: str, status: int
) -> None:
    with server.client() as http:
        http.post("/api/tools/python_coder", json={"session_id": "s3b", "code": "print(1)"})
        info = http.get("/api/files/info", params={"session_id": "s3b", "name": name})
        assert info.status_code == status, info.text
        run = http.post(
            "/api/tools/python_coder",
            json={"session_id": "s3b", "code": "print(1)", "file_paths": {name: "df"}},
        )
        # An unsafe name is refused by the request's validation (422), the rest as by info.
        assert run.status_code == (422 if status == 400 else status), run.text
        if status != 400:
            assert run.json()["detail"] == info.json()["detail"]


def test_file_paths_copy_the_object_once_per_etag(server: LiveServer, bucket: S3Server) -> None:
    name = "s3://lab/trial_1/data.csv"
    copy = server.data_dir / "scratch/u1-s3c/s3/lab/trial_1/data.csv"
    request = {
        "session_id": "s3c",
        "code": "print(int(df['value'].sum()))",
        "file_paths": {name: "df"},
    }
    with server.client() as http:
        first = http.post("/api/tools/python_coder", json=request).json()
        assert first["success"], first
        assert first["data"]["stdout"] == f"{sum(range(2000))}\n"
        assert copy.read_bytes() == csv_body(1)
        stamp = copy.stat().st_mtime_ns
        again = http.post("/api/tools/python_coder", json=request).json()
        assert again["data"]["stdout"] == first["data"]["stdout"]
        assert copy.stat().st_mtime_ns == stamp  # same ETag: not fetched again
        bucket.client().put_object(Bucket=BUCKET, Key="trial_1/data.csv", Body=csv_body(2))
        try:
            changed = http.post("/api/tools/python_coder", json=request).json()
            assert changed["data"]["stdout"] == f"{2 * sum(range(2000))}\n", changed
        finally:
            bucket.client().put_object(Bucket=BUCKET, Key="trial_1/data.csv", Body=csv_body(1))


def test_the_llm_picks_an_s3_object_among_uploads_and_objects(server: LiveServer) -> None:
    with server.client() as http:
        http.put("/api/sessions/s3d/uploads/weather.csv", content=b"day,rain\n1,0.5\n")
        answer = http.post(
            "/api/tools/python_coder",
            json={"session_id": "s3d", "query": "Q-S3 what is the total value?"},
        ).json()
    assert answer.get("success"), answer
    assert "total 1999000" in answer["output"], answer
    selected = answer["selected_files"]
    assert selected == [
        {"name": "s3/lab/trial_1/data.csv", "reason": "it holds the values", "variable": "df1"}
    ]


def test_an_object_over_the_size_cap_is_413(
    start_server: StartServer, tmp_path: Path, bucket: S3Server
) -> None:
    server = start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []),
        **settings(bucket, MAX_UPLOAD_SIZE_MB="0.5"),
    )
    with server.client() as http:
        run = http.post(
            "/api/tools/python_coder",
            json={
                "session_id": "s3e",
                "code": "print(len(ev))",
                "file_paths": {"s3://lab/trial_1/events.parquet": "ev"},
            },
        )
    assert run.status_code == 413, run.text
    assert "MAX_UPLOAD_SIZE_MB" in run.json()["detail"]
    assert not (server.data_dir / "scratch/u1-s3e/s3/lab/trial_1").exists() or not any(
        (server.data_dir / "scratch/u1-s3e/s3/lab/trial_1").iterdir()
    )


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("problem", ["wrong secret", "unreachable"])
def test_bad_credentials_or_endpoint_are_a_clear_502_or_503_without_secrets(
    start_server: StartServer, tmp_path: Path, bucket: S3Server, problem: str
) -> None:
    secret = "wrong-secret-that-must-never-show-0123456789"
    if problem == "wrong secret":
        env, status, endpoint = settings(bucket, S3_SECRET_ACCESS_KEY=secret), 502, bucket.endpoint
    else:
        endpoint = f"http://127.0.0.1:{closed_port()}"
        env, status = settings(bucket, S3_ENDPOINT_URL=endpoint, S3_SECRET_ACCESS_KEY=secret), 503
    server = start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []), **env)
    with server.client() as http:
        http.post("/api/tools/python_coder", json={"session_id": "s3f", "code": "print(1)"})
        listed = http.get("/api/files", params={"session_id": "s3f"})
        info = http.get(
            "/api/files/info", params={"session_id": "s3f", "name": "s3://lab/trial_1/data.csv"}
        )
        uploads = http.get("/api/files", params={"session_id": "s3f", "source": "uploads"})
    for response in (listed, info):
        assert response.status_code == status, response.text
        assert endpoint in response.json()["detail"]
        assert secret not in response.text and bucket.access_key not in response.text
    assert uploads.status_code == 200 and uploads.json() == []  # uploads alone: no S3 asked
    assert secret not in server.log()
