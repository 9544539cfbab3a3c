"""Session export (issue 14): a clean notebook or script of the steps that worked, that reruns.

A real server runs a 3-step Plan-and-Execute turn on the scripted model (one step
fails first and is fixed, one draws a plot). The export is then run with nbclient
(and the script with plain python) in a folder holding copies of the inputs, away
from the sandbox and its loaders, and must print the session's numbers again.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import scripted_server
from tests.support.agent_script import sse_events, upload
from tests.support.live_server import LiveServer

SALES = (
    b"region,price,qty\nnorth,10,1\nsouth,30,2\nnorth,12.5,3\neast,40,1\nsouth,20,5\nnorth,15,2\n"
)
TAG = "Q-EXPORT"
QUESTION = f"{TAG} How many rows are there, what is the mean price by region, and plot it?"
STEP_CODE = [
    "n = len(df1)\nprint('rows:', n)\n",
    "by_region = df1.groupby('region')['price'].mean()\nprint(by_region.round(3).to_string())\n"
    "print('overall mean:', round(df1['price'].mean(), 3))\n",
    "import matplotlib.pyplot as plt\nby_region.plot(kind='bar')\n"
    "print('north share:', round((df1['region'] == 'north').sum() / n, 3))\n",
]
BROKEN = "print(df1['cost'].mean())\n"  # step 2's first attempt: no such column
PLAN = {
    "steps": [
        {"goal": f"{TAG}-1 count the rows", "tool": "python_coder", "success_criterion": "n"},
        {"goal": f"{TAG}-2 mean by region", "tool": "python_coder", "success_criterion": "m"},
        {"goal": f"{TAG}-3 plot by region", "tool": "python_coder", "success_criterion": "p"},
    ]
}
ANSWER = "There are 6 rows. The overall mean price is 21.25, and north holds 50% of the rows."
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _replies() -> list[dict[str, Any]]:
    # Each step's generate prompt lists the whole plan, so the replies are used up in order.
    generated = [STEP_CODE[0], BROKEN, STEP_CODE[2]]
    return [
        {"when": ["[stage: plan]", TAG], "content": json.dumps(PLAN)},
        {"when": ["[stage: replan]", TAG], "content": '{"decision": "continue"}', "repeat": True},
        {"when": ["[stage: review]", TAG], "content": '{"answers_question": true}', "repeat": True},
        *({"when": ["[stage: generate]", TAG], "content": f"```python\n{c}```"} for c in generated),
        {"when": ["[stage: fix]", TAG], "content": f"```python\n{STEP_CODE[1]}```"},
        {"when": ["[stage: answer]", TAG], "content": "Done.", "repeat": True},
        {"when": ["[stage: final]", TAG], "content": ANSWER},
    ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(tmp_path_factory.mktemp("export"), _replies()) as live:
        yield live


@pytest.fixture(scope="module")
def session(server: LiveServer) -> dict[str, Any]:
    """The Plan-and-Execute turn's events, by type."""
    upload(server, "exp", data=SALES)
    body = {"message": QUESTION, "session_id": "exp", "agent_type": "plan_execute",
            "stream": True}  # fmt: skip
    with server.client(timeout=300) as http, http.stream("POST", "/api/chat", json=body) as reply:
        assert reply.status_code == 200
        events = list(sse_events(reply.iter_lines()))
    executions = [data for kind, data in events if kind == "execution"]
    assert [e["ok"] for e in executions] == [True, False, True, True]
    final = next(data for kind, data in events if kind == "final")
    assert final["text"] == ANSWER
    succeeded = [e for e in executions if e["ok"]]
    return {
        "outputs": [e["stdout"] for e in succeeded],
        "run_ids": [e["run_id"] for e in succeeded],
        "final": final,
    }


def _export(server: LiveServer, export_format: str) -> tuple[str, str]:
    with server.client() as http:
        reply = http.get(f"/api/sessions/exp/export?format={export_format}")
    assert reply.status_code == 200, reply.text
    disposition = reply.headers["content-disposition"]
    assert disposition.startswith("attachment;") and f'.{export_format}"' in disposition
    return reply.headers["content-type"], reply.text


def _numbers(text: str) -> list[str]:
    return NUMBER.findall(text)


def _stdout(cell: Any) -> str:
    return "".join(o["text"] for o in cell.outputs if o.get("name") == "stdout")


def _inputs_folder(tmp_path: Path) -> Path:
    """A folder holding a copy of the session's input, where the export will run."""
    folder = tmp_path / "rerun"
    (folder / "uploads").mkdir(parents=True)
    (folder / "uploads" / "sales.csv").write_bytes(SALES)
    return folder


def test_the_plan_and_execute_answer_cites_each_step_that_printed_its_numbers(
    session: dict[str, Any],
) -> None:
    citations = session["final"]["citations"]
    for citation in citations:
        assert ANSWER[citation["start"] : citation["end"]] == citation["text"]
    first, second, third = session["run_ids"]
    assert [(c["text"], c["run_id"], c["output_line"], c["line"]) for c in citations] == [
        ("6", first, "rows: 6", 1),
        ("21.25", second, "overall mean: 21.25", 5),
        ("50", third, "north share: 0.5", 1),  # "50%" of the share printed as 0.5
    ]
    assert all(c["kind"] == "computed" and c["code"].endswith("\n") for c in citations)


def test_the_notebook_holds_only_the_successful_steps_with_a_header(
    server: LiveServer, session: dict[str, Any]
) -> None:
    content_type, text = _export(server, "ipynb")
    assert content_type.startswith("application/x-ipynb+json")
    notebook = nbformat.reads(text, as_version=4)
    nbformat.validate(notebook)
    header = notebook.cells[0].source
    assert f"`uploads/sales.csv` | {len(SALES)} | `{hashlib.sha256(SALES).hexdigest()}`" in header
    assert re.search(r"Libraries: python 3\.11\.\d+, pandas \d", header)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    setup, loading, *steps = code
    assert hashlib.sha256(SALES).hexdigest() in setup.source
    assert loading.source.startswith("df1 = pd.read_csv('uploads/sales.csv'")
    # Each step's own code, without the sandbox's loader, the failed attempt left out.
    assert [cell.source + "\n" for cell in steps] == STEP_CODE
    assert "_pd" not in text and BROKEN.strip() not in text
    assert [_stdout(cell) for cell in steps] == session["outputs"]
    plots = [o for o in steps[2].outputs if o["output_type"] == "display_data"]
    assert len(plots) == 1 and plots[0]["data"]["image/png"].startswith("iVBOR")
    markdown = [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]
    questions = [source for source in markdown if source.startswith("## Question")]
    assert questions == [f"## Question\n\n> {QUESTION}"]  # once, above its three steps
    assert any("count the rows" in source for source in markdown)


def test_the_notebook_reruns_outside_the_sandbox_and_prints_the_same_numbers(
    server: LiveServer, session: dict[str, Any], tmp_path: Path
) -> None:
    _, text = _export(server, "ipynb")
    notebook = nbformat.reads(text, as_version=4)
    folder = _inputs_folder(tmp_path)
    NotebookClient(
        notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": folder}}
    ).execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    setup, _, *steps = code
    assert _stdout(setup) == ""  # the inputs are there and unchanged
    assert [_numbers(_stdout(cell)) for cell in steps] == [
        _numbers(output) for output in session["outputs"]
    ]
    assert sorted([_stdout(steps[2]), _stdout(steps[0])]) == ["north share: 0.5\n", "rows: 6\n"]
    assert any(o["output_type"] == "display_data" for o in steps[2].outputs)  # the plot again


def test_the_script_reruns_with_plain_python(
    server: LiveServer, session: dict[str, Any], tmp_path: Path
) -> None:
    content_type, text = _export(server, "py")
    assert content_type.startswith("text/x-python")
    assert text.startswith("# %% [markdown]\n# # ")
    folder = _inputs_folder(tmp_path)
    (folder / "session.py").write_text(text)
    ran = subprocess.run(
        [sys.executable, "session.py"], cwd=folder, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stderr
    assert _numbers(ran.stdout) == [n for output in session["outputs"] for n in _numbers(output)]
    assert list((folder / "outputs").glob("step_3_*.png"))  # the step's figure, saved


def test_a_changed_input_is_reported_by_the_rerun(
    server: LiveServer, session: dict[str, Any], tmp_path: Path
) -> None:
    _, text = _export(server, "py")
    folder = _inputs_folder(tmp_path)
    (folder / "uploads" / "sales.csv").write_bytes(SALES + b"west,99,1\n")
    (folder / "session.py").write_text(text)
    ran = subprocess.run(
        [sys.executable, "session.py"], cwd=folder, capture_output=True, text=True, timeout=300
    )
    assert "Changed since the session: uploads/sales.csv" in ran.stdout


def test_another_users_session_and_bad_requests_are_refused(
    server: LiveServer, session: dict[str, Any]
) -> None:
    with server.client() as admin:
        created = admin.post("/api/users", json={"username": "mallory", "password": "mallory-pw"})
        assert created.status_code == 201
        wrong_format = admin.get("/api/sessions/exp/export?format=pdf")
        unknown = admin.get("/api/sessions/nobody/export")
    with server.client(token=server.token("mallory", "mallory-pw")) as mallory:
        stolen = mallory.get("/api/sessions/exp/export?format=ipynb")
    assert stolen.status_code == 404 and stolen.json()["code"] == "session_not_found"
    assert "SHA-256" not in stolen.text
    assert unknown.status_code == 404
    assert wrong_format.status_code == 422
