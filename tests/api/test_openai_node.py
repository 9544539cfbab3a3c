"""The official OpenAI Node SDK (`openai`, pinned by tests/openai_node/package-lock.json)
drives the Code Interpreter flow against a live server (issue 29): a CSV through the Files
API into a container, the `code_interpreter` tool of the Responses API whole and streamed,
then the container's files listed and downloaded. The script is
tests/openai_node/code_interpreter.mjs; it prints one JSON object of what it saw."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import scripted_server
from tests.support.agent_script import react_turn
from tests.support.live_server import ROOT, LiveServer
from tests.support.mcp_keys import api_key

NODE = shutil.which("node")
FOLDER = ROOT / "tests" / "openai_node"
SCRIPT = FOLDER / "code_interpreter.mjs"

pytestmark = pytest.mark.skipif(
    NODE is None, reason="OPENAI NODE SDK TEST NOT RUN: no `node`; `make test` installs nodejs"
)

CSV = "region,amount\nnorth,1234\nsouth,567\neast,89\n"
TOTAL = "1890"  # 1234 + 567 + 89
ANSWER = f"The total amount is {TOTAL}, written to total.csv."
WRITTEN = b"total\n1890\n"  # outputs/total.csv, as the code writes it
# Pandas sums the uploaded file's column, wherever the container keeps it, and writes a file.
CODE = (
    "import glob\nimport pandas as pd\n"
    "sales = pd.read_csv(glob.glob('**/sales.csv', recursive=True)[0])\n"
    "total = sales['amount'].sum()\nprint('total amount:', total)\n"
    "pd.DataFrame({'total': [total]}).to_csv('outputs/total.csv', index=False)\n"
)
QUESTION = "Q-NODE-CI What is the total amount in sales.csv? Use pandas."
STREAM_QUESTION = "Q-NODE-STREAM What is the total amount in sales.csv? Use pandas."
REPLIES: list[dict[str, Any]] = [
    # More than three statements: the coder asks for a review of its run.
    {"when": "[stage: review]", "content": '{"answers_question": true}', "repeat": True},
    *react_turn("Q-NODE-CI", CODE, ANSWER),
    *react_turn("Q-NODE-STREAM", CODE, ANSWER),
]
# The streamed events, in OpenAI's order: the call (its code streamed before it runs),
# then the answer with its citation; a run of deltas counts once.
EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.code_interpreter_call.in_progress",
    "response.code_interpreter_call_code.delta",
    "response.code_interpreter_call_code.done",
    "response.code_interpreter_call.interpreting",
    "response.code_interpreter_call.completed",
    "response.output_item.done",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.annotation.added",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(tmp_path_factory.mktemp("openai-node"), REPLIES) as live:
        yield live


@pytest.fixture(scope="module")
def seen(server: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the script saw, run once against the server with a new user's API key."""
    assert (FOLDER / "node_modules" / "openai").is_dir(), "run `make openai-node` first"
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(SCRIPT)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=FOLDER,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path_factory.mktemp("node-home")),
            "OPENAI_BASE_URL": f"{server.url}/v1",
            "OPENAI_API_KEY": api_key(server, "node-sdk-user"),
            "OPENAI_MODEL": "scripted",
            "CSV_TEXT": CSV,
            "QUESTION": QUESTION,
            "STREAM_QUESTION": STREAM_QUESTION,
        },
        check=False,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_uploaded_csv_becomes_a_container_file(seen: dict[str, Any]) -> None:
    assert seen["file"]["id"].startswith("file-")
    assert seen["file"]["filename"] == "sales.csv" and seen["file"]["bytes"] == len(CSV)
    assert seen["container"]["id"].startswith("cntr_")
    assert seen["container"]["name"] == "node-sdk-sales"
    assert seen["deleted"] == {"id": seen["file"]["id"], "deleted": True}


@pytest.mark.parametrize("how", ["response", "stream"])
def test_the_code_interpreter_call_runs_pandas_and_the_answer_states_the_sum(
    seen: dict[str, Any], how: str
) -> None:
    response = seen["stream"]["response"] if how == "stream" else seen["response"]
    assert response["status"] == "completed"
    assert response["id"].startswith("resp_")
    assert response["output_types"][0] == "code_interpreter_call"
    assert response["output_types"][-1] == "message"
    (call,) = response["calls"]
    assert call["status"] == "completed"
    # What ran: the scripted code, after whatever loads the container's files first.
    assert call["code"].endswith(CODE), call["code"]
    assert call["container_id"] == seen["container"]["id"]
    logs = [output["logs"] for output in call["outputs"] if output["type"] == "logs"]
    assert any(f"total amount: {TOTAL}" in text for text in logs), call["outputs"]
    assert response["answer"] == ANSWER
    # The file the code wrote is cited where the answer names it.
    (citation,) = response["annotations"]
    start = ANSWER.index("total.csv")
    assert citation == {
        "type": "container_file_citation",
        "container_id": seen["container"]["id"],
        "file_id": citation["file_id"],
        "filename": "total.csv",
        "start_index": start,
        "end_index": start + len("total.csv"),
    }
    written = [f for f in seen["container_files"] if f["path"].endswith("/total.csv")]
    assert [f["id"] for f in written] == [citation["file_id"]]


def test_the_stream_sends_the_code_interpreter_events_in_order(seen: dict[str, Any]) -> None:
    kinds = seen["stream"]["events"]
    runs = [kind for i, kind in enumerate(kinds) if i == 0 or kind != kinds[i - 1]]
    assert runs == EVENTS, kinds


def test_the_container_files_are_listed_and_downloaded(seen: dict[str, Any]) -> None:
    by_name = {Path(file["path"]).name: file for file in seen["container_files"]}
    assert {"sales.csv", "total.csv"} <= set(by_name), seen["container_files"]
    assert by_name["sales.csv"]["source"] == "user"
    assert by_name["total.csv"]["source"] == "assistant"
    downloads = {Path(path).name: got for path, got in seen["downloads"].items()}
    assert downloads["sales.csv"] == {"bytes": len(CSV), "sha256": sha256(CSV.encode())}
    assert downloads["total.csv"] == {"bytes": len(WRITTEN), "sha256": sha256(WRITTEN)}
