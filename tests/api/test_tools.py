"""Code, uploads and workspace files over HTTP, through the real server (in this process
where no code runs in the sandbox: tests/support/app_client.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import StartApp, StartServer, write_replies

SALES = b"region,price\nnorth,10\nsouth,30\n"


def test_code_runs_in_the_session_and_answers_in_the_tool_shape(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []))
    with server.client() as http:
        upload = http.post(
            "/api/upload", data={"session_id": "s1"}, files={"file": ("sales.csv", SALES)}
        )
        assert upload.status_code == 201
        uploaded = upload.json()
        assert {k: uploaded[k] for k in ("name", "path", "size", "extension", "session_id")} == {
            "name": "sales.csv",
            "path": "uploads/sales.csv",
            "size": len(SALES),
            "extension": "csv",
            "session_id": "s1",
        }
        # The same metadata as GET /api/files/info.
        info = http.get("/api/files/info", params={"session_id": "s1", "name": "sales.csv"})
        assert {k: uploaded[k] for k in ("kind", "summary", "details", "error")} == {
            k: info.json()[k] for k in ("kind", "summary", "details", "error")
        }
        assert uploaded["kind"] == "tabular" and uploaded["details"]["columns"]
        code = "import pandas as pd\ndf = pd.read_csv('uploads/sales.csv')\nprint(df.price.mean())"
        run = http.post("/api/tools/python_coder", json={"session_id": "s1", "code": code}).json()
        assert set(run) == {"success", "answer", "data", "metadata", "error"}
        assert run["success"] and run["error"] is None
        assert run["data"]["stdout"] == "20.0\n" and run["data"]["returncode"] == 0
        assert run["data"]["workspace"] == "/workspace"  # no server path
        assert run["metadata"]["code_execution_time"] > 0
        assert [v["name"] for v in run["metadata"]["variables"]] == ["df"]

        refused = http.post(
            "/api/tools/python_coder",
            json={"session_id": "s1", "code": "import subprocess\nsubprocess.run(['id'])"},
        ).json()
        assert not refused["success"] and refused["data"]["returncode"] == 1
        assert "line 1: import of 'subprocess' is not allowed" in refused["error"]

        failing = http.post(
            "/api/tools/python_coder", json={"session_id": "s1", "code": "df['missing']"}
        ).json()
        assert "KeyError: 'missing'" in failing["error"] and 'File "<cell>"' in failing["error"]

        listed = [f["path"] for f in http.get("/api/sessions/s1/files").json()]
        assert listed == ["uploads/sales.csv"]  # the variables are the server's: not listed
        download = http.get("/api/sessions/s1/files/uploads/sales.csv")
        assert download.content == SALES
        assert download.headers["content-disposition"].startswith("attachment")
        assert http.get("/api/sessions/s1/files/uploads/nope.csv").status_code == 404

    audit = (tmp_path / "data0" / "logs" / "tool_runs.jsonl").read_text().splitlines()
    assert [json.loads(line)["success"] for line in audit] == [True, False, False]


def test_another_users_session_id_names_their_own_session(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []))
    with server.client() as admin:
        admin.post("/api/tools/python_coder", json={"session_id": "mine", "code": "x = 1"})
        admin.post("/api/users", json={"username": "bob", "password": "bob-password"})
    with server.client(server.token("bob", "bob-password")) as bob:
        unknown = [
            bob.get("/api/sessions/mine/files"),
            bob.get("/api/sessions/mine/files/variables/x.json"),
            bob.get("/api/sessions/never-used/files"),
        ]
        # Bob's "mine" is a session of his own: the admin's variables are not in it.
        run = bob.post("/api/tools/python_coder", json={"session_id": "mine", "code": "print(x)"})
        theirs = bob.get("/api/sessions/mine/files/variables/x.json")
    assert [response.status_code for response in unknown] == [404] * 3
    assert run.status_code == 200 and not run.json()["success"]
    assert "NameError" in run.json()["error"]
    assert theirs.status_code == 404


def test_uploads_are_checked(start_app: StartApp, tmp_path: Path) -> None:
    server = start_app(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []), PYTHON_CODE_MAX_FILE_SIZE="1"
    )
    with server.client() as http:

        def upload(name: str, content: bytes = b"a,b\n1,2\n") -> int:
            files = {"file": (name, content)}
            return http.post("/api/upload", data={"session_id": "u"}, files=files).status_code

        assert upload("data.csv") == 201
        assert upload("../evil.csv") == 400
        assert upload("nested/evil.csv") == 400
        assert upload(".hidden.csv") == 400
        assert upload("tool.exe") == 415
        assert upload("big.csv", b"x" * (2 * 1024 * 1024)) == 413
        names = [f["path"] for f in http.get("/api/sessions/u/files").json()]
    assert names == ["uploads/data.csv"]


def test_variables_survive_a_server_restart(start_server: StartServer, tmp_path: Path) -> None:
    server = start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", []))
    with server.client() as http:
        code = "import pandas as pd\ntotals = pd.Series([1.5, 2.5], name='t')\ncount = 2"
        assert http.post(
            "/api/tools/python_coder", json={"session_id": "keep", "code": code}
        ).json()["success"]
    server.stop()
    server.start()
    with server.client() as http:
        run = http.post(
            "/api/tools/python_coder",
            json={"session_id": "keep", "code": "print(totals.sum() * count)"},
        ).json()
    assert run["data"]["stdout"] == "8.0\n"
