"""API_examples.ipynb does what it says: run headlessly against a live server (scripted model).

Every code cell must run without an error, and the key cells must show what their
text promises: the login, the answers, the agent's steps and plot, the three
python_coder modes, files, conversations, structured output, a tool round trip
and the shape of errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import ADMIN_PASSWORD, scripted_server
from tests.support.agent_script import react_turn
from tests.support.live_server import ROOT

MEDIAN_SPECS = {
    "functions": [
        {
            "name": "median",
            "purpose": "the median of a list of numbers",
            "inputs": [{"name": "numbers", "type": "list[float]", "description": "numbers"}],
            "outputs": "float",
            "dependencies": [],
            "complexity": "O(n log n)",
        }
    ]
}
MEDIAN_TESTS = {
    "tests": [
        {"description": "odd count", "kind": "normal", "inputs": {"numbers": [3, 1, 2]},
         "expected": 2},
        {"description": "even count", "kind": "edge", "inputs": {"numbers": [4, 1, 3, 2]},
         "expected": 2.5},
    ]
}  # fmt: skip
MEDIAN = """```python
def median(numbers):
    ordered = sorted(numbers)
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2
```"""
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
REPLIES: list[dict[str, Any]] = [
    {"when": "what can you do", "content": "I answer questions about data with Python."},
    {"when": "data analyst does", "content": "Cleaning, analysing and reporting."},
    *react_turn("mean price in sales.csv"),
    {
        "when": ["[stage: generate]", "highest price"],
        "content": "```python\nprint(df1.loc[df1['price'].idxmax(), 'region'])\n```",
    },
    {"when": ["[stage: answer]", "highest price"], "content": "South has the highest price."},
    {"when": "[stage: tdd_specs]", "content": json.dumps(MEDIAN_SPECS)},
    {"when": "[stage: tdd_tests] [function: median]", "content": json.dumps(MEDIAN_TESTS)},
    {"when": "[stage: tdd_implement] [function: median]", "content": MEDIAN},
    {"when": "largest city of France", "content": '{"city": "Paris", "population": 2100000}'},
    {"when": "weather in Paris", "content": CALL},
    {"when": "Tool result", "content": "It is 18 °C in Paris."},
]


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The notebook, run: each tagged cell's text output (and a marker for images)."""
    root = tmp_path_factory.mktemp("notebook")
    notebook = nbformat.read(ROOT / "API_examples.ipynb", as_version=4)
    with scripted_server(root, REPLIES) as server, pytest.MonkeyPatch.context() as env:
        env.setenv("PDA_URL", server.url)
        env.setenv("PDA_PASSWORD", ADMIN_PASSWORD)
        NotebookClient(
            notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": root}}
        ).execute()
    yield {tag: _text(cell) for cell in notebook.cells for tag in cell.metadata.get("tags", [])}


def _text(cell: Any) -> str:
    parts = []
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            parts.append(output["text"])
        elif "image/png" in output.get("data", {}):
            parts.append("<image/png>")
        elif "text/plain" in output.get("data", {}):
            parts.append(output["data"]["text/plain"])
    return "".join(parts)


def test_it_logs_in_and_chats(executed: dict[str, str]) -> None:
    assert executed["login"].strip() == "signed in as admin"
    assert "LLM: scripted / scripted" in executed["health"]
    assert "I answer questions about data with Python." in executed["chat"]
    assert "answered by: chat" in executed["chat"]
    assert executed["chat-stream"].strip() == "Cleaning, analysing and reporting."


def test_an_agent_analyses_the_upload_and_the_plot_shows(executed: dict[str, str]) -> None:
    assert "uploads/sales.csv" in executed["upload"] and "price: int64" in executed["upload"]
    agent = executed["agent"]
    assert "[router] react" in agent and "[code, attempt 1]" in agent
    assert "[output] mean price: 20.0" in agent
    assert "[answer] The mean price is 20.0." in agent
    assert "[cited] 20.0 (computed) <- 'mean price: 20.0'" in agent
    assert agent.count("<image/png>") == 1


def test_python_coder_in_its_three_modes(executed: dict[str, str]) -> None:
    assert "success: True" in executed["coder-generate"]
    assert "output: south" in executed["coder-generate"]
    assert executed["coder-code"].strip() == "total: 60"
    assert "all tests passed: True" in executed["coder-tdd"]
    assert "def median(numbers):" in executed["coder-tdd"]


def test_the_session_exports_as_a_notebook_of_its_steps(executed: dict[str, str]) -> None:
    export = executed["export"]
    assert export.startswith('attachment; filename="')
    assert "markdown  ## Question" in export and "markdown  **Step 3**: your code" in export
    # The code step's own file_paths load, then its code.
    assert "code      sales = pd.read_csv('uploads/sales.csv', sep=',')" in export
    assert "markdown  **Step 4**: functions built test-first" in export
    assert "code      def run_tests():" in export


def test_files_conversations_structured_output_tools_and_errors(executed: dict[str, str]) -> None:
    assert "uploads/sales.csv" in executed["files"] and "north,10" in executed["files"]
    assert "delete: 204" in executed["conversations"]
    assert executed["structured"].strip() == "City(city='Paris', population=2100000)"
    assert 'the model calls get_weather {"city": "Paris"}' in executed["tools"]
    assert "answer: It is 18 °C in Paris." in executed["tools"]
    errors = executed["errors"]
    assert "The model 'no-such-model' does not exist" in errors
    assert "AuthenticationError: 401" in errors
    assert "BadRequestError: logit_bias" in errors
    assert "Conversation not found." in errors
