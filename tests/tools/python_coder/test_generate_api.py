"""`POST /api/tools/python_coder` in generate mode, every branch, on a real server.

One server serves the module. Each test's question carries its own tag, and
each scripted reply names the stage and the tag it answers (`when`), so the
tests do not depend on their order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ADMIN_PASSWORD
from tests.files.helpers import zip_bytes
from tests.support.live_server import LiveServer

SALES = b"region,price,units\nnorth,10,1\nsouth,30,2\nnorth,20,3\n"
GOOD = 'mean = df1["price"].mean()\nprint("mean price:", mean)\n'


def reply(stage: str, tag: str, content: str, **extra: Any) -> dict[str, Any]:
    return {"when": [f"[stage: {stage}]", tag], "content": content, **extra}


def code(text: str) -> str:
    return f"Here is the code:\n```python\n{text}```\nIt prints the answer."


REPLIES = [
    # first try
    reply("generate", "Q-FIRST", code(GOOD)),
    reply("answer", "Q-FIRST", "**Key findings**\n- The mean price is 20.0.\n"),
    # an invented number in the answer
    reply("generate", "Q-INVENT", code(GOOD)),
    reply("answer", "Q-INVENT", "**Key findings**\n- The mean price is 23.5 across 7 regions."),
    # a static violation, then a modification
    reply("generate", "Q-STATIC", code("import subprocess\nprint(subprocess.run(['id']))\n")),
    reply("modify", "Q-STATIC", code(GOOD)),
    reply("answer", "Q-STATIC", "Mean price: 20.0"),
    # a runtime error, then an auto-fix
    reply("generate", "Q-FIX", code('print(df1["cost"].mean())\n')),
    reply("fix", "Q-FIX", code(GOOD)),
    reply("answer", "Q-FIX", "The mean price is 20.0."),
    # out of retries
    reply("generate", "Q-NEVER", code("print(1 / 0)\n")),
    *(reply("fix", "Q-NEVER", code(f'raise ValueError("still broken {n}")\n')) for n in range(4)),
    # a fix that keeps handing back the failing code
    reply(
        "generate",
        "Q-STUCK",
        code("import pandas as pd\ndf = pd.read_csv('data.csv')\nprint(df)\n"),
    ),
    reply(
        "fix",
        "Q-STUCK",
        code("import pandas as pd\ndf = pd.read_csv('data.csv')\nprint(df)\n"),
        repeat=True,
    ),
    # a workspace the sandbox has vandalised
    reply("generate", "Q-HOSTILE", code(GOOD)),
    reply("answer", "Q-HOSTILE", "The mean price is 20.0."),
    # a verification loop: the review rejects, the modification is approved
    reply(
        "generate",
        "Q-REVIEW",
        code('north = df1[df1.region == "north"]\ntotal = north.units.sum()\nx = 1\ny = 2\n'),
    ),
    reply(
        "review",
        "Q-REVIEW",
        '{"answers_question": false, "problems": ["it never prints the total"]}',
    ),
    reply(
        "modify",
        "Q-REVIEW",
        code(
            'north = df1[df1.region == "north"]\ntotal = north.units.sum()\n'
            'label = "north units"\nprint(label, total)\n'
        ),
    ),
    reply("review", "Q-REVIEW", '```json\n{"answers_question": true, "problems": []}\n```'),
    reply("answer", "Q-REVIEW", "North sold 4 units."),
    # file selection among 20 files
    reply(
        "select_files",
        "Q-SELECT",
        '{"files": [{"name": "uploads/revenue_by_region.csv", '
        '"reason": "it has revenue per region"}, {"name": "uploads/nope.csv", "reason": "x"}]}',
    ),
    reply("generate", "Q-SELECT", code('print("total revenue:", df1["revenue"].sum())\n')),
    reply("answer", "Q-SELECT", "Total revenue is 60."),
    reply("select_files", "Q-RANKED", "I think the revenue file is best."),
    reply("generate", "Q-RANKED", code('print("total revenue:", df1["revenue"].sum())\n')),
    reply("answer", "Q-RANKED", "Total revenue is 60."),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("coder")
    replies = folder / "replies.json"
    replies.write_text(json.dumps(REPLIES))
    live = LiveServer(
        folder / "data",
        ADMIN_PASSWORD=ADMIN_PASSWORD,
        LLM_BACKEND="scripted",
        SCRIPTED_REPLIES=str(replies),
    )
    live.start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client(timeout=120) as client:
        yield client


def upload(http: httpx.Client, session: str, name: str, content: bytes) -> None:
    response = http.post(
        "/api/upload", data={"session_id": session}, files={"file": (name, content)}
    )
    assert response.status_code == 201, response.text


def ask(http: httpx.Client, session: str, query: str, **extra: Any) -> dict[str, Any]:
    response = http.post(
        "/api/tools/python_coder", json={"session_id": session, "query": query, **extra}
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def prompts(server: LiveServer, tag: str) -> list[dict[str, Any]]:
    lines = (server.data_dir / "logs" / "prompts.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    return [r for r in records if tag in json.dumps(r.get("prompt"))]


def test_first_try_answers_from_the_output_and_writes_the_notepad(
    server: LiveServer, http: httpx.Client
) -> None:
    upload(http, "first", "sales.csv", SALES)
    result = ask(http, "first", "Q-FIRST what is the mean price?")
    assert result["success"] and result["error"] is None
    assert result["output"] == "mean price: 20.0\n"
    assert result["answer"] == "**Key findings**\n- The mean price is 20.0."
    assert result["code"].startswith("import pandas") and GOOD in result["code"]
    assert result["selected_files"] == [
        {
            "name": "uploads/sales.csv",
            "reason": "one of the session's data files",
            "variable": "df1",
        }
    ]
    assert result["iterations"] == 1 and result["modifications"] == []
    assert "trivial" in result["review_skipped"]
    assert [a["success"] for a in result["execution_history"]] == [True]
    assert result["llm_calls"] == 2 and result["tokens"] > 0
    # Issue 14: the answer's number cites the successful attempt's run and output line.
    assert result["run_id"] == result["execution_history"][0]["run_id"]
    assert result["citations"] == [
        {
            "text": "20.0",
            "start": result["answer"].index("20.0"),
            "end": result["answer"].index("20.0") + 4,
            "kind": "computed",
            "run_id": result["run_id"],
            "code": result["code"],
            "output_line": "mean price: 20.0",
            "line": 1,
            "source": None,
        }
    ]

    entry = result["notepad_entry"]
    assert entry["task"] == "Q-FIRST what is the mean price?"
    assert entry["summary"] == "mean price: 20.0" and "mean" in entry["variables"]
    script = http.get(f"/api/sessions/first/files/{entry['code_file']}")
    assert script.status_code == 200 and GOOD in script.text
    notepad = json.loads(http.get("/api/sessions/first/files/notepad.json").text)
    assert notepad["entries"][-1]["code_file"] == entry["code_file"]

    stages = [r["stage"] for r in prompts(server, "Q-FIRST")]
    assert stages == ["generate", "answer"]
    generate = prompts(server, "Q-FIRST")[0]["prompt"][-1]["content"]
    for section in ("HISTORIES", "INPUT", "PLANS", "REACTS", "TASK", "METADATA", "RULES"):
        assert f"## {section}" in generate
    assert "df1" in generate and "uploads/sales.csv" in generate and "price" in generate

    # The next question in the session sees the notepad and the kept variables.
    again = ask(http, "first", "Q-INVENT and the mean price again?")
    later = prompts(server, "Q-INVENT")[0]["prompt"][-1]["content"]
    assert "Q-FIRST what is the mean price? → mean price: 20.0" in later
    assert "- mean: float" in later
    # The drafted answer invented numbers, so the answer is the output itself.
    assert "23.5" not in again["answer"] and "mean price: 20.0" in again["answer"]


def test_a_static_violation_is_modified_before_anything_runs(http: httpx.Client) -> None:
    upload(http, "static", "sales.csv", SALES)
    result = ask(http, "static", "Q-STATIC mean price please")
    assert result["success"] and result["output"] == "mean price: 20.0\n"
    first = result["verification_history"][0]
    assert not first["approved"]
    assert any("subprocess" in problem for problem in first["static_problems"])
    assert [m["stage"] for m in result["modifications"]] == ["static"]
    assert len(result["execution_history"]) == 1  # the forbidden code never ran


def test_a_runtime_error_is_fixed_from_the_traceback(
    server: LiveServer, http: httpx.Client
) -> None:
    upload(http, "fix", "sales.csv", SALES)
    result = ask(http, "fix", "Q-FIX mean price")
    assert result["success"]
    first, second = result["execution_history"]
    assert not first["success"] and "KeyError: 'cost'" in first["error"]
    assert second["success"] and second["stdout"] == "mean price: 20.0\n"
    assert [m["stage"] for m in result["modifications"]] == ["fix"]
    fix_prompt = next(r for r in prompts(server, "Q-FIX") if r["stage"] == "fix")
    assert "KeyError: 'cost'" in fix_prompt["prompt"][-1]["content"]


def test_running_out_of_retries_fails_cleanly_with_the_whole_history(
    server: LiveServer, http: httpx.Client
) -> None:
    upload(http, "never", "sales.csv", SALES)
    result = ask(http, "never", "Q-NEVER divide")
    assert not result["success"]
    history = result["execution_history"]
    assert len(history) == 5 and not any(a["success"] for a in history)
    assert "ZeroDivisionError" in history[0]["error"]
    assert [a["error"].splitlines()[-1] for a in history[1:]] == [
        f"ValueError: still broken {n}" for n in range(4)
    ]
    assert "after 5 attempts" in result["error"] and result["answer"] == result["error"]
    assert [m["stage"] for m in result["modifications"]] == ["fix"] * 4
    assert result["notepad_entry"] is None
    last_fix = [r for r in prompts(server, "Q-NEVER") if r["stage"] == "fix"][-1]
    reacts = last_fix["prompt"][-1]["content"].split("## REACTS\n")[1].split("##")[0]
    assert "Attempt 1 failed: ZeroDivisionError" in reacts
    assert "Attempt 3 failed: ValueError: still broken 1" in reacts


def test_a_fix_that_repeats_failed_code_is_not_run_and_ends_the_loop(
    server: LiveServer, http: httpx.Client
) -> None:
    upload(http, "stuck", "sales.csv", SALES)
    result = ask(http, "stuck", "Q-STUCK show the data")
    assert not result["success"]
    history = result["execution_history"]
    assert len(history) == 3  # one real failure, then two repeats: stopped before 5
    assert "FileNotFoundError" in history[0]["error"]
    assert all("repeated code that had already failed" in a["error"] for a in history[1:])
    fixes = [r for r in prompts(server, "Q-STUCK") if r["stage"] == "fix"]
    assert len(fixes) == 2
    first, second = (f["prompt"][-1]["content"] for f in fixes)
    assert "## HINT\nThe data files are already loaded" in first
    assert "repeated code that had already failed" in second and "FileNotFoundError" in second


VANDALISM = """
from pathlib import Path
Path("scripts").rmdir()
Path("scripts").write_text("not a folder")
Path("uploads/a\\\\b.csv").write_text("x\\n1\\n")
open(b"uploads/\\xff.csv", "w").write("x\\n1\\n")
Path("uploads/etc").symlink_to("/etc")
Path("uploads/deep").mkdir()
Path("uploads/deep/in.csv").write_text("y\\n2\\n")
"""


def test_a_vandalised_workspace_still_answers_and_lists_cleanly(http: httpx.Client) -> None:
    upload(http, "hostile", "sales.csv", SALES)
    run = http.post("/api/tools/python_coder", json={"session_id": "hostile", "code": VANDALISM})
    assert run.status_code == 200 and run.json()["success"], run.text
    listed = http.get("/api/files", params={"session_id": "hostile"})
    assert listed.status_code == 200
    assert [f["name"] for f in listed.json()] == ["uploads/deep/in.csv", "uploads/sales.csv"]
    everything = http.get("/api/sessions/hostile/files")
    assert everything.status_code == 200
    assert not any("passwd" in f["path"] or "\\" in f["path"] for f in everything.json())

    result = ask(http, "hostile", "Q-HOSTILE mean price", files=["sales.csv"])
    assert result["success"] and result["output"] == "mean price: 20.0\n"
    assert result["notepad_entry"] is None
    assert any("notepad could not be updated" in w for w in result["warnings"])


def test_the_review_loop_modifies_until_the_code_answers(http: httpx.Client) -> None:
    upload(http, "review", "sales.csv", SALES)
    result = ask(http, "review", "Q-REVIEW how many units did north sell?")
    assert result["success"] and result["output"] == "north units 4\n"
    rounds = result["verification_history"]
    assert [r["approved"] for r in rounds] == [False, True]
    assert rounds[0]["review"]["problems"] == ["it never prints the total"]
    assert result["modifications"][0]["stage"] == "review"
    assert result["modifications"][0]["reason"] == "it never prints the total"
    assert result["review_skipped"] is None and result["iterations"] == 2


def _twenty_files(http: httpx.Client, session: str) -> None:
    upload(http, session, "revenue_by_region.csv", b"region,revenue\nnorth,10\nsouth,50\n")
    for index in range(19):
        upload(http, session, f"sensor_{index:02d}.csv", b"timestamp,temperature\n1,20.5\n")


def test_the_model_picks_files_among_twenty_with_reasons(
    server: LiveServer, http: httpx.Client
) -> None:
    _twenty_files(http, "select")
    result = ask(http, "select", "Q-SELECT what is the total revenue?")
    assert result["selected_files"] == [
        {
            "name": "uploads/revenue_by_region.csv",
            "reason": "it has revenue per region",
            "variable": "df1",
        }
    ]
    assert result["output"] == "total revenue: 60\n"
    generate = next(r for r in prompts(server, "Q-SELECT") if r["stage"] == "generate")
    assert "sensor_" not in generate["prompt"][-1]["content"]
    select = next(r for r in prompts(server, "Q-SELECT") if r["stage"] == "select_files")
    # The lexical pre-ranking put the matching file on the shortlist the model saw.
    assert "revenue_by_region.csv" in select["prompt"][-1]["content"]


def test_an_unusable_pick_falls_back_to_the_lexical_ranking(http: httpx.Client) -> None:
    _twenty_files(http, "ranked")
    result = ask(http, "ranked", "Q-RANKED what is the total revenue?")
    names = [f["name"] for f in result["selected_files"]]
    assert names[0] == "uploads/revenue_by_region.csv" and len(names) == 5
    assert "lexical match" in result["selected_files"][0]["reason"]
    assert result["success"]


def test_bad_input_gets_clear_client_errors(http: httpx.Client) -> None:
    unknown = http.post("/api/tools/python_coder", json={"session_id": "nobody", "query": "hi"})
    assert unknown.status_code == 404 and "not found" in unknown.json()["detail"]
    empty = http.post("/api/tools/python_coder", json={"session_id": "first", "query": "  "})
    assert empty.status_code == 422 and "non-empty `query`" in empty.text
    both = http.post(
        "/api/tools/python_coder", json={"session_id": "first", "query": "a", "code": "print(1)"}
    )
    assert both.status_code == 422
    missing = http.post(
        "/api/tools/python_coder",
        json={"session_id": "first", "query": "a", "files": ["uploads/nope.csv"]},
    )
    assert missing.status_code == 404 and "nope.csv" in missing.json()["detail"]
    escape = http.post(
        "/api/tools/python_coder",
        json={"session_id": "first", "query": "a", "files": ["../secret_key"]},
    )
    assert escape.status_code == 400
    bad_name = http.post(
        "/api/tools/python_coder",
        json={"session_id": "first", "code": "print(1)", "file_paths": {"a.csv": "not a name"}},
    )
    assert bad_name.status_code == 422 and "not a Python variable name" in bad_name.text
    # A file the code wrote with an extension the tools do not read.
    http.post(
        "/api/tools/python_coder",
        json={"session_id": "first", "code": "open('outputs/blob.bin', 'wb').write(b'x')"},
    )
    unsupported = http.post(
        "/api/tools/python_coder",
        json={"session_id": "first", "query": "a", "files": ["outputs/blob.bin"]},
    )
    assert unsupported.status_code == 415 and ".bin" in unsupported.json()["detail"]


def test_custom_code_with_file_paths_loads_named_frames(http: httpx.Client) -> None:
    upload(http, "paths", "sales.csv", SALES)
    run = http.post(
        "/api/tools/python_coder",
        json={
            "session_id": "paths",
            "code": "print(sales.units.sum(), type(sales).__name__)",
            "file_paths": {"sales.csv": "sales"},
        },
    ).json()
    assert run["success"], run
    assert run["data"]["stdout"] == "6 DataFrame\n"


def test_files_are_listed_with_metadata(http: httpx.Client, tmp_path: Path) -> None:
    upload(http, "listing", "sales.csv", SALES)
    upload(http, "listing", "notes.md", b"# Notes\nprices rose\n")
    listed = http.get("/api/files", params={"session_id": "listing"}).json()
    assert [f["name"] for f in listed] == ["uploads/notes.md", "uploads/sales.csv"]
    info = http.get("/api/files/info", params={"session_id": "listing", "name": "sales.csv"})
    assert info.status_code == 200
    body = info.json()
    assert body["kind"] == "tabular" and body["size"] == len(SALES)
    assert [c["name"] for c in body["details"]["columns"]] == ["region", "price", "units"]
    params = {"session_id": "listing", "name": "missing.csv"}
    assert http.get("/api/files/info", params=params).status_code == 404
    assert http.get("/api/files", params={"session_id": "nobody"}).status_code == 404


def test_archives_unpack_safely_into_a_new_folder(http: httpx.Client) -> None:
    upload(http, "zips", "bundle.zip", zip_bytes({"a/sales.csv": SALES, "notes.txt": b"hi"}))
    body = {"session_id": "zips", "name": "bundle.zip"}
    extracted = http.post("/api/files/extract", json=body)
    assert extracted.status_code == 201, extracted.text
    assert extracted.json() == {
        "folder": "uploads/bundle",
        "files": ["uploads/bundle/a/sales.csv", "uploads/bundle/notes.txt"],
    }
    info = http.get("/api/files/info", params={"session_id": "zips", "name": "bundle/a/sales.csv"})
    assert info.json()["kind"] == "tabular"
    assert http.post("/api/files/extract", json=body).status_code == 409  # never overwrites

    upload(http, "zips", "evil.zip", zip_bytes({"../../escape.txt": b"x"}))
    evil = http.post("/api/files/extract", json={"session_id": "zips", "name": "evil.zip"})
    assert evil.status_code == 400 and "evil.zip" in evil.json()["detail"]
    upload(http, "zips", "bomb.zip", zip_bytes({"zeros.csv": b"0" * 50_000_000}))
    bomb = http.post("/api/files/extract", json={"session_id": "zips", "name": "bomb.zip"})
    assert bomb.status_code == 400 and "zip bomb" in bomb.json()["detail"]
    listed = [f["path"] for f in http.get("/api/sessions/zips/files").json()]
    assert not any(p.startswith(("uploads/evil/", "uploads/bomb/")) for p in listed)
    # A refused archive leaves no folder behind, so a retry is refused for the same reason.
    assert (
        http.post("/api/files/extract", json={"session_id": "zips", "name": "evil.zip"}).status_code
        == 400
    )
    not_archive = http.post("/api/files/extract", json={"session_id": "zips", "name": "notes.txt"})
    assert not_archive.status_code in (404, 415)
