"""The Plan-and-Execute graph with a scripted model: a 3-step plan, a replan, the answer."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from backend.core.agents.plan_execute.graph import build_plan_execute_graph, sequenced_goals
from backend.core.agents.tools import ToolContext, ToolResult
from backend.llm.profile import SMALL
from tests.core.agents.streams import run
from tests.support.scripted_llm import scripted_llm


@dataclass
class FakeTool:
    name: str
    outputs: dict[str, str]
    description: str = "a fake tool"
    calls: list[tuple[str, str]] = field(default_factory=list)
    fails: set[str] = field(default_factory=set)  # the inputs it fails on
    modes: list[str] = field(default_factory=list)  # the answer each call was asked for

    async def run(self, tool_input: str, context: ToolContext) -> ToolResult:
        self.calls.append((tool_input, context.plan))
        self.modes.append(context.answer)
        output = self.outputs.get(tool_input, f"done: {tool_input}")
        if tool_input in self.fails:
            return context.ran(self.name, ToolResult(f"Error: {output}", False))
        return context.ran(self.name, ToolResult(output, True, {"answer": f"Answer: {output}"}))


def step(goal: str, tool: str) -> dict[str, str]:
    return {"goal": goal, "tool": tool, "success_criterion": f"{goal} is known"}


PLAN = {
    "steps": [
        step("list the files", "list_files"),
        step("total sales per region", "python_coder"),
        step("plot the totals", "python_coder"),
    ]
}
REVISED = {
    "decision": "revise",
    "reason": "north dominates",
    "steps": [step("plot north", "coder")],
}


async def test_a_three_step_plan_is_revised_after_a_failed_step_and_answered() -> None:
    files = FakeTool("list_files", {"list the files": "uploads/sales.csv"})
    coder = FakeTool(
        "python_coder",
        {"total sales per region": "north: 50\nsouth: 10", "plot the totals": "no plot"},
        fails={"plot the totals"},
    )
    plan = {"steps": [*PLAN["steps"], step("plot the totals again", "python_coder")]}
    llm, model = scripted_llm(
        [
            {"when": "[stage: plan]", "content": json.dumps(plan)},
            {"when": "[stage: replan]", "content": json.dumps(REVISED)},
            {"when": "[stage: final]", "content": "North sold 50, south 10."},
        ]
    )
    state, events = await run(build_plan_execute_graph([files, coder], llm), "Sales by region?")

    assert state["final_answer"] == "North sold 50, south 10."
    assert [r["goal"] for r in state["results"]] == [
        "list the files",
        "total sales per region",
        "plot the totals",
        "plot north",  # the revision replaced "plot the totals again"
    ]
    assert [e["type"] for e in events] == [
        "plan", "step_start", "execution", "step_start", "execution",
        "step_start", "execution", "plan", "step_start", "execution", "token",
    ]  # fmt: skip
    assert events[7]["revised"] and events[7]["reason"] == "north dominates"
    assert events[7]["steps"][0]["tool"] == "python_coder"  # "coder" matched fuzzily
    goal, plan_context = coder.calls[0]
    assert goal == "total sales per region"
    assert "→ 2. total sales per region" in plan_context and "Sales by region?" in plan_context
    assert "Step 1 found:\nuploads/sales.csv" in plan_context  # the output, passed on
    assert "Step 2 found:\nnorth: 50" in coder.calls[1][1]
    assert coder.modes == ["none", "none", "none"]  # no step writes an answer of its own
    # Steps that worked go on without a model call; the failed one is replanned.
    stages = [prompt.splitlines()[0] for prompt in model.prompts]
    assert stages == ["[stage: plan]", "[stage: replan]", "[stage: final]"]
    assert "north: 50" in model.prompts[-1]


async def test_an_unusable_plan_becomes_one_step_and_invented_numbers_are_refused() -> None:
    coder = FakeTool("python_coder", {"What is the total?": "total: 60"})
    llm, _ = scripted_llm(
        [
            {"when": "[stage: plan]", "content": "Let me think about a plan..."},
            {"when": "[stage: final]", "content": "The total is 75."},
        ]
    )
    state, events = await run(build_plan_execute_graph([coder], llm), "What is the total?")
    assert events[0]["steps"] == [
        {"goal": "What is the total?", "tool": "python_coder", "success_criterion": "answered"}
    ]
    assert state["final_answer"] == "Answer: total: 60"  # 75 appears in no step's output


def test_a_question_that_spells_out_its_steps_is_split_into_them() -> None:
    assert sequenced_goals("first count the rows, then compute the mean score") == [
        "count the rows",
        "compute the mean score",
    ]
    assert sequenced_goals("Load it; then plot price. Finally summarise the trend") == [
        "Load it",
        "plot price",
        "summarise the trend",
    ]
    assert sequenced_goals("What is the mean price?") == ["What is the mean price?"]


async def test_a_small_model_follows_the_questions_steps_and_answers_from_them() -> None:
    coder = FakeTool("python_coder", {"count the rows": "40", "compute the mean score": "67.5"})
    llm, model = scripted_llm([])  # not one model call: the small model's plans are noise
    llm.backend.profile = SMALL
    state, _ = await run(
        build_plan_execute_graph([coder], llm), "first count the rows, then compute the mean score"
    )
    assert [call[0] for call in coder.calls] == ["count the rows", "compute the mean score"]
    assert state["final_answer"] == (
        "**count the rows**: Answer: 40\n\n**compute the mean score**: Answer: 67.5"
    )
    assert model.prompts == []


@pytest.mark.parametrize(
    ("question", "goals"),
    [
        # Issue 39: "first" as an adjective split this into "Show me the" and "10 rows …".
        ("Show me the first 10 rows of the table.", ["Show me the first 10 rows of the table."]),
        ("What were the next 5 orders after the first one?", None),
        ("Show the first column, the second column and the third column.", None),
        ("If the mean is above 5, then plot it.", None),
        ("First load the file, then plot the sales.", ["load the file", "plot the sales"]),
        ("First, count the rows. Next, plot the sales.", ["count the rows", "plot the sales"]),
        ("load the data and then plot it", ["load the data", "plot it"]),
        ("1. count the rows 2. compute the mean", ["count the rows", "compute the mean"]),
        ("Please:\n- count the rows\n- plot the sales", ["count the rows", "plot the sales"]),
    ],
)
async def test_a_small_models_plan_splits_only_where_words_sequence(
    question: str, goals: list[str] | None
) -> None:
    coder = FakeTool("python_coder", {})
    llm, _ = scripted_llm([])
    llm.backend.profile = SMALL
    _, events = await run(build_plan_execute_graph([coder], llm), question)
    expected = goals or [question]  # None: the whole question is one step
    assert [planned["goal"] for planned in events[0]["steps"]] == expected
    assert [call[0] for call in coder.calls] == expected
