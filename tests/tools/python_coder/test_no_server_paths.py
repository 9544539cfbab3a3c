"""No response of python_coder's routes carries a server path (issue 24).

The workspace is shown as the code sees it, `/workspace`, with or without
bubblewrap: without it (SANDBOX=none) the code runs in the real folder under
DATA_DIR, and its output and tracebacks name it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import StartServer, write_replies
from tests.tools.python_coder.tdd.test_solver import INSTRUCTION, tdd_replies
from tests.tools.python_coder.test_generate_api import SALES, code, reply

MISSING = "from pathlib import Path\nprint(Path.cwd())\nopen(Path.cwd() / 'missing.csv')\n"
WRITES = "from pathlib import Path\nPath('outputs/r.txt').write_text('x')\nprint(Path.cwd())\n"
REPLIES = [
    reply("generate", "Q-PATH", code(MISSING)),
    reply("fix", "Q-PATH", code(WRITES)),
    reply("answer", "Q-PATH", "The code ran in its workspace."),
    *tdd_replies(),
]


@pytest.mark.parametrize("sandbox", ["auto", "none"])
def test_code_generate_and_tdd_answers_name_no_server_path(
    start_server: StartServer, tmp_path: Path, sandbox: str
) -> None:
    server = start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", REPLIES), SANDBOX=sandbox
    )
    answers: list[dict[str, Any]] = []
    with server.client(timeout=120) as http:
        http.post("/api/upload", data={"session_id": "p"}, files={"file": ("sales.csv", SALES)})
        for body in (
            {"code": MISSING},
            {"code": WRITES},
            {"query": "Q-PATH where do you run?"},
            {"query": INSTRUCTION, "mode": "tdd"},
            {"code": "x = 1", "file_paths": {"nope.csv": "df"}},
        ):
            response = http.post("/api/tools/python_coder", json={"session_id": "p", **body})
            answers.append(response.json())
    missing, writes, generated, tdd, _ = answers
    assert "FileNotFoundError" in missing["error"] and "/workspace/missing.csv" in missing["error"]
    assert writes["success"] and writes["data"]["stdout"] == "/workspace\n"
    assert writes["data"]["workspace"] == "/workspace"
    assert writes["data"]["files"] == ["outputs/r.txt"]
    assert generated["success"] and generated["workspace"] == "/workspace"
    assert "/workspace/missing.csv" in generated["execution_history"][0]["error"]
    assert tdd["all_tests_passed"]
    text = json.dumps(answers)
    for server_path in {str(server.data_dir), str(server.data_dir.resolve())}:
        assert server_path not in text
