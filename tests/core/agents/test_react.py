"""The ReAct graph end to end with a scripted model: tools, loop breaker, step limit."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from backend.config import load_settings
from backend.core.agents.react.graph import build_react_graph
from backend.core.agents.react.parsing import match_tool, parse_reply
from backend.core.agents.tools import PythonCoderTool, RagTool, ToolContext, ToolResult
from backend.files.catalog import WorkspaceCatalog
from backend.storage.workspaces import Workspaces
from backend.tools.python_coder.coder import PythonCoder
from backend.tools.rag import RagIndex
from backend.tools.sandbox.availability import SandboxStatus
from backend.tools.sandbox.executor import ExecutorLimits, SandboxedExecutor
from tests.core.agents.streams import run
from tests.support.scripted_llm import scripted_llm

TOOLS = ["python_coder", "list_files", "rag_retrieval"]
LIMITS = ExecutorLimits(timeout=20, max_memory_mb=1024, max_file_mb=20)


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("python_coder", "python_coder"),
        ("Python Coder", "python_coder"),
        ("coder", "python_coder"),
        ("generate_code", "python_coder"),
        ("generate", "python_coder"),
        ("pyhton_coder", "python_coder"),
        ("list-files", "list_files"),
        ("rag", "rag_retrieval"),
        ("make_coffee", None),
    ],
)
def test_tool_names_are_matched_fuzzily(written: str, meant: str | None) -> None:
    assert match_tool(written, TOOLS) == meant


def test_replies_small_models_write_are_understood() -> None:
    action = parse_reply(
        "Thought: I need data\nAction: Coder\nAction Input: `mean of price`", TOOLS
    )
    assert (action.tool, action.tool_input) == ("python_coder", "`mean of price`")
    quoted = parse_reply('action python_coder\naction input: "mean of price"', TOOLS)
    assert (quoted.tool, quoted.tool_input) == ("python_coder", "mean of price")
    final = parse_reply("Thought: done\nFinal Answer: 42", TOOLS)
    assert final.answer == "42" and final.tool is None
    assert parse_reply("The answer is 42.", TOOLS).answer == "The answer is 42."
    assert parse_reply("Action: make_coffee\nAction Input: x", TOOLS).unknown_tool == "make_coffee"


@dataclass
class RecordingTool:
    name: str = "list_files"
    description: str = "lists files"
    inputs: list[str] = field(default_factory=list)

    async def run(self, tool_input: str, context: ToolContext) -> ToolResult:
        self.inputs.append(tool_input)
        result = ToolResult(f"files for {tool_input}: sales.csv", True, {"files": ["sales.csv"]})
        return context.ran(self.name, result)  # a tool reports what it did


def act(tool: str, tool_input: str) -> str:
    return f"Thought: let me look\nAction: {tool}\nAction Input: {tool_input}"


async def test_an_action_then_a_final_answer() -> None:
    tool = RecordingTool()
    llm, model = scripted_llm(
        [act("list files", "session"), "Thought: ok\nFinal Answer: sales.csv"]
    )
    graph = build_react_graph([tool], llm)
    state, events = await run(graph, "which files do I have?")
    assert state["final_answer"] == "sales.csv" and state["stop_reason"] == "answered"
    assert tool.inputs == ["session"]
    assert [e["type"] for e in events] == ["tool_call", "execution"]
    assert events[1]["stdout"] == "files for session: sales.csv"
    assert "Observation: files for session: sales.csv" in model.prompts[1]


async def test_a_repeated_action_breaks_the_loop_politely() -> None:
    tool = RecordingTool()
    llm, _ = scripted_llm([{"content": act("list_files", "same"), "repeat": True}])
    state, _ = await run(build_react_graph([tool], llm, max_iterations=10), "files?")
    assert state["stop_reason"] == "repeated_action"
    assert tool.inputs == ["same"]  # run once; the repeat was refused, not re-run
    assert len(state["steps"]) == 2
    assert "the same action kept repeating" in state["final_answer"]
    assert "files for same: sales.csv" in state["final_answer"]


async def test_the_step_limit_ends_with_a_polite_answer_not_an_exception() -> None:
    tool = RecordingTool()
    llm, _ = scripted_llm([act("list_files", f"try {n}") for n in range(5)])
    state, _ = await run(build_react_graph([tool], llm, max_iterations=3), "files?")
    assert state["stop_reason"] == "max_iterations" and len(tool.inputs) == 3
    assert state["final_answer"].startswith("I stopped before a final answer")
    assert "the limit of 3 steps was reached" in state["final_answer"]


async def test_an_unknown_tool_is_an_observation_the_model_can_fix() -> None:
    llm, model = scripted_llm([act("make_coffee", "now"), "Final Answer: no coffee"])
    state, _ = await run(build_react_graph([RecordingTool()], llm), "coffee?")
    assert state["final_answer"] == "no coffee"
    assert "there is no tool named 'make_coffee'" in state["steps"][0]["observation"]
    assert "Use one of: list_files" in model.prompts[1]


SALES = "region,price\nnorth,10\nsouth,30\n"


async def test_react_answers_from_a_csv_and_a_failed_attempt_reaches_the_next_generation(
    tmp_path: Path,
) -> None:
    settings = load_settings(DATA_DIR=tmp_path, PYTHON_CODE_MAX_RETRIES=1)
    workspaces = Workspaces(tmp_path)
    workspace = workspaces.ensure("u1-s")
    (workspace / "uploads" / "sales.csv").write_text(SALES)
    catalog = WorkspaceCatalog(workspaces)
    coder = PythonCoder(settings, workspaces, catalog)
    replies = [
        {"when": "[stage: react]", "content": act("python_coder", "mean of cost")},
        {"when": ["[stage: generate]", "mean of cost"],
         "content": "```python\nprint(df1['cost'].mean())\n```"},
        {"when": "[stage: react]", "content": act("python_coder", "mean of price")},
        {"when": ["[stage: generate]", "mean of price"],
         "content": "```python\nprint('mean price:', df1['price'].mean())\n```"},
        {"when": ["[stage: answer]", "mean of price"], "content": "The mean price is 20.0."},
        {"when": "[stage: react]", "content": "Final Answer: The mean price is 20.0."},
    ]  # fmt: skip
    llm, model = scripted_llm(replies)
    async with SandboxedExecutor(workspace, LIMITS, SandboxStatus("bwrap", "test")) as executor:
        tool = PythonCoderTool(coder=coder, llm=llm, executor=executor, session_id="u1-s")
        state, events = await run(build_react_graph([tool], llm), "What is the mean price?")
    catalog.runner.close()  # the file reader's helper process

    assert state["final_answer"] == "The mean price is 20.0."
    first, second = state["steps"]
    assert not first["ok"] and "KeyError: 'cost'" in first["observation"]
    assert second["ok"] and "mean price: 20.0" in second["observation"]
    generate = next(p for p in model.prompts if "[stage: generate]" in p and "mean of price" in p)
    reacts = generate.split("## REACTS\n")[1].split("\n## ")[0]
    assert "Task: mean of cost" in reacts and "KeyError: 'cost'" in reacts
    assert "print(df1['cost'].mean())" in reacts
    written = [e for e in events if e["type"] == "code"]  # each attempt's, as it ran
    assert written[-1]["code"].endswith("print('mean price:', df1['price'].mean())\n")


async def test_react_retrieves_passages_and_the_answer_cites_them(tmp_path: Path) -> None:
    workspace = Workspaces(tmp_path).ensure("u1-docs")
    (workspace / "uploads" / "notes.md").write_text(
        "# Prices\nPrices rose sharply in March because of the storm.\n\n"
        "# Staff\nThe team grew to twelve people.\n"
    )
    index = RagIndex(tmp_path)
    try:
        tool = RagTool(index, user_id=1, session_id="u1-docs")
        llm, model = scripted_llm(
            [
                act("rag", "why did prices rise"),
                "Thought: found it\nFinal Answer: Because of the storm in March [1].",
            ]
        )
        state, _ = await run(build_react_graph([tool], llm), "Why did prices rise?")
    finally:
        index.close()
    step = state["steps"][0]
    assert step["ok"] and step["action"] == "rag_retrieval"
    assert "[1] (source: uploads/notes.md" in step["observation"]
    assert step["data"]["citations"][0] == {"n": 1, "source": "uploads/notes.md", "page": None}
    assert state["final_answer"] == "Because of the storm in March [1]."
    assert "storm" in model.prompts[1]
