"""A small model's answer is what the run printed (issue 39): never its own code or output.

The embedded model wrote, under a correct run, a made-up code block and an "Output:"
block ("Total units per region: 3112", East's figure). Here the scripted model plays
that reply on the SMALL profile, through the real coder and sandbox, in the ReAct and
Plan-and-Execute graphs: the answer must be the real output, and the model is never
asked to write it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from backend.config import load_settings
from backend.core.agents.plan_execute.graph import build_plan_execute_graph
from backend.core.agents.react.graph import build_react_graph
from backend.core.agents.tools import PythonCoderTool
from backend.files.catalog import WorkspaceCatalog
from backend.llm.profile import SMALL
from backend.storage.workspaces import Workspaces
from backend.tools.python_coder.coder import PythonCoder
from backend.tools.sandbox.availability import SandboxStatus
from backend.tools.sandbox.executor import ExecutorLimits, SandboxedExecutor
from tests.core.agents.streams import run
from tests.support.scripted_llm import RecordingModel, scripted_llm

LIMITS = ExecutorLimits(timeout=20, max_memory_mb=1024, max_file_mb=20)
SALES = "region,units\nEast,1500\nWest,2000\nEast,1612\n"
# What SmolLM2 wrote under the run's table: code and output that never ran.
INVENTED = (
    "To find the total units per region, I ran:\n\n"
    "```python\nprint(df.groupby('region')['units'].sum().sum())\n```\n\n"
    "Output:\n```\nTotal units per region: 3112\n```\n\n"
    "Total units per region: 3112."
)
CODE = "```python\nprint(df1.groupby('region')['units'].sum().to_string())\n```"


@pytest.fixture
async def small_coder(tmp_path: Path) -> AsyncIterator[tuple[PythonCoderTool, RecordingModel]]:
    settings = load_settings(DATA_DIR=tmp_path)
    workspaces = Workspaces(tmp_path)
    workspace = workspaces.ensure("u1-s")
    (workspace / "uploads" / "sales.csv").write_text(SALES)
    catalog = WorkspaceCatalog(workspaces)
    llm, model = scripted_llm(
        [
            {"when": "[stage: answer]", "content": INVENTED, "repeat": True},
            {"when": "[stage: generate]", "content": CODE, "repeat": True},
            {"when": "[stage: analysis_spec]", "content": "{}", "repeat": True},
        ]
    )
    llm.backend.profile = SMALL
    coder = PythonCoder(settings, workspaces, catalog)
    try:
        async with SandboxedExecutor(workspace, LIMITS, SandboxStatus("bwrap", "t")) as executor:
            yield PythonCoderTool(coder=coder, llm=llm, executor=executor, session_id="u1-s"), model
    finally:
        catalog.runner.close()


def _printed(events: list[dict[str, Any]]) -> list[str]:
    return [e["stdout"] for e in events if e["type"] == "execution" and e["ok"]]


async def test_react_on_a_small_model_answers_with_the_printed_output_only(
    small_coder: tuple[PythonCoderTool, RecordingModel],
) -> None:
    tool, model = small_coder
    graph = build_react_graph([tool], tool.llm)
    state, events = await run(graph, "total units per region")
    (output,) = _printed(events)
    assert "East    3112" in output and "West    2000" in output  # the run was right
    answer = state["final_answer"]
    assert answer == f"Here is what the code printed:\n\n```text\n{output.strip()}\n```"
    assert "".join(e["text"] for e in events if e["type"] == "token") == answer  # as shown
    assert "python" not in answer and "Output:" not in answer and "Total units" not in answer
    assert not any(prompt.startswith("[stage: answer]") for prompt in model.prompts)


async def test_plan_execute_on_a_small_model_answers_each_step_with_its_output(
    small_coder: tuple[PythonCoderTool, RecordingModel],
) -> None:
    tool, model = small_coder
    graph = build_plan_execute_graph([tool], tool.llm)
    state, events = await run(graph, "First load the file, then sum the units per region.")
    outputs = _printed(events)
    assert len(outputs) == 2
    answer = state["final_answer"]
    for goal, output in zip(["load the file", "sum the units per region"], outputs, strict=True):
        assert f"**{goal}**: Here is what the code printed:\n\n```text\n{output.strip()}\n```" in (
            answer
        )
    assert "python" not in answer and "Output:" not in answer and "Total units" not in answer
    assert not any(prompt.startswith("[stage: answer]") for prompt in model.prompts)
