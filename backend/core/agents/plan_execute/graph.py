"""The Plan-and-Execute graph: plan → execute → replan → … → final, as a `StateGraph`.

The planner writes structured steps (goal, tool, success criterion) through a
JSON-schema grammar where the backend has one. Each step's tool gets the whole
plan and what the earlier steps found as context (python_coder's PLANS section),
and writes no answer of its own: its output goes straight to the next step. A
step that fails goes to the replanner, which continues, revises the remaining
steps, or finishes; revisions are capped. A step that worked needs no model
call to go on. The final answer, the turn's only one, draws on the steps'
results, may state only numbers they show, and is shown as it is written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from backend.core.agents.plan_execute import prompts
from backend.core.agents.plan_execute.state import Plan, PlanState, Replan, StepResult
from backend.core.agents.react.parsing import match_tool
from backend.core.agents.tools import AgentTool, ToolContext, ToolResult
from backend.core.events import AnswerDelta, PlannedStep, StepStart
from backend.core.events import Plan as PlanEvent
from backend.core.sequencing import spelled_out_steps
from backend.llm.turn import LLMCallLimit, StructuredReplyError, TurnLLM
from backend.tools.provenance.streaming import GroundedStream

MAX_TOTAL_STEPS = 10


def sequenced_goals(question: str) -> list[str]:
    """The steps a question spells out ("first count the rows, then compute the mean");
    its sequencing words count only where they sequence (`backend/core/sequencing.py`)."""
    return spelled_out_steps(question)[:MAX_TOTAL_STEPS]


def steps_answer(results: list[StepResult]) -> str:
    """The steps that worked, each with its answer; used where the model cannot write one."""
    lines = []
    for result in results:
        if result["ok"]:
            answer = str(result["data"].get("answer") or result["observation"]).strip()
            lines.append(f"**{result['goal']}**: {answer}")
    return "\n\n".join(lines)


async def _streamed_answer(llm: TurnLLM, question: str, results: list[StepResult]) -> str:
    """The final answer, shown as it is written; with python_coder's results, each piece
    once its numbers are grounded in what the steps printed, and the last coded step's
    output closing an answer that stated a number they did not."""
    writer = get_stream_writer()
    shown: list[str] = []

    def show(text: str) -> None:
        if text:
            shown.append(text)
            writer(AnswerDelta(text=text))

    coded = [r for r in results if r["tool"] == "python_coder" and r["ok"]]
    files = [str(name) for r in coded for name in r["data"].get("files") or ()]
    evidence = "\n".join(r["observation"] for r in results)
    grounded = GroundedStream(evidence, files) if coded else None
    messages = llm.messages("", prompts.answer(question, results))
    async for text in llm.stream("final", messages):
        show(grounded.feed(text) if grounded else text)
    if grounded is not None:
        show(grounded.close())
    if not "".join(shown).strip() or (grounded is not None and grounded.withheld):
        last = coded[-1] if coded else [r for r in results if r["ok"]][-1]
        fallback = str(last["data"].get("answer") or last["observation"])
        show(("\n\n" if "".join(shown).strip() else "") + fallback)
    return "".join(shown).strip()


def _plan_event(steps: list[dict[str, str]], revised_because: str | None = None) -> PlanEvent:
    planned = [PlannedStep(**step) for step in steps]
    if revised_because is None:
        return PlanEvent(steps=planned, revised=False)
    return PlanEvent(steps=planned, revised=True, reason=revised_because)


def build_plan_execute_graph(
    tools: Sequence[AgentTool],
    llm: TurnLLM,
    *,
    max_replans: int = 2,
    checkpointer: Checkpointer = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    by_name = {tool.name: tool for tool in tools}
    names = list(by_name)
    described = [(tool.name, tool.description) for tool in tools]
    default_tool = "python_coder" if "python_coder" in by_name else names[0]

    def steps_of(plan: Plan | Replan) -> list[dict[str, str]]:
        return [
            {
                "goal": step.goal,
                "tool": match_tool(step.tool, names) or default_tool,
                "success_criterion": step.success_criterion,
            }
            for step in plan.steps
        ]

    async def plan(state: PlanState) -> dict[str, Any]:
        question = state["question"]
        if not llm.profile.plans:  # its plans name steps like "write_a_plan": follow the question
            goals = sequenced_goals(question)
            steps = [
                {"goal": g, "tool": default_tool, "success_criterion": "answered"} for g in goals
            ]
            get_stream_writer()(_plan_event(steps))
            return {"plan": steps, "replans": 0}
        try:
            steps = steps_of(await llm.json("plan", "", prompts.plan(question, described), Plan))
        except StructuredReplyError:  # no usable plan: one step that tries the whole question
            steps = [{"goal": question, "tool": default_tool, "success_criterion": "answered"}]
        get_stream_writer()(_plan_event(steps))
        return {"plan": steps, "replans": 0}

    async def execute(state: PlanState) -> dict[str, Any]:
        remaining, results = state["plan"], state.get("results", [])
        step, index = remaining[0], len(results) + 1
        writer = get_stream_writer()
        writer(StepStart(index=index, goal=step["goal"], tool=step["tool"],
                         success_criterion=step["success_criterion"]))  # fmt: skip
        whole = [{"goal": r["goal"], "success_criterion": ""} for r in results] + remaining
        context = ToolContext(
            plan=prompts.step_context(state["question"], whole, index, results),
            report=lambda event: writer(
                event
                if isinstance(event, AnswerDelta)
                else event.model_copy(update={"index": index})
            ),
            # One answer, at the end; a small model's steps each answer, and `final` joins them.
            answer="none" if llm.profile.plans else "write",
        )
        try:
            with llm.tool_span(step["tool"]):
                outcome = await by_name[step["tool"]].run(step["goal"], context)  # reported
        except LLMCallLimit:
            raise  # the turn's limit: the runner stops the turn
        except Exception as exc:  # the replanner decides what a failed step means
            outcome = context.ran(step["tool"], ToolResult(f"Error: {exc}", False))
        observation, ok, data = outcome.observation, outcome.ok, outcome.data
        result = StepResult(goal=step["goal"], tool=step["tool"], observation=observation,
                            ok=ok, data=data)  # fmt: skip
        return {"plan": remaining[1:], "results": [result]}

    async def replan(state: PlanState) -> dict[str, Any]:
        remaining, replans = state.get("plan", []), state.get("replans", 0)
        if not remaining or replans >= max_replans or not llm.profile.plans:
            return {}  # a small model answers "continue" whatever it is shown
        if state.get("results", [])[-1]["ok"]:
            return {}  # on course: the next step goes on from this one's output
        prompt = prompts.replan(state["question"], remaining, state.get("results", []))
        try:
            decision = await llm.json("replan", "", prompt, Replan)
        except StructuredReplyError:
            return {}  # no readable decision: keep the plan
        if decision.decision == "finish":
            return {"plan": []}
        if decision.decision == "revise" and decision.steps:
            steps = steps_of(decision)
            get_stream_writer()(_plan_event(steps, revised_because=decision.reason))
            return {"plan": steps, "replans": replans + 1}
        return {}

    async def final(state: PlanState) -> dict[str, Any]:
        results = state.get("results", [])
        if not any(r["ok"] for r in results):
            failures = "\n".join(f"- {r['goal']}: {r['observation'][:300]}" for r in results)
            return {"final_answer": f"I could not complete any step of the plan:\n\n{failures}"}
        if not llm.profile.plans:  # each step's own grounded answer, in order
            return {"final_answer": steps_answer(results)}
        return {"final_answer": await _streamed_answer(llm, state["question"], results)}

    def after_replan(state: PlanState) -> Literal["execute", "final"]:
        more = bool(state.get("plan")) and len(state.get("results", [])) < MAX_TOTAL_STEPS
        return "execute" if more else "final"

    graph = StateGraph(PlanState)
    graph.add_node("plan", plan)
    graph.add_node("execute", execute)
    graph.add_node("replan", replan)
    graph.add_node("final", final)
    graph.add_edge(START, "plan")
    graph.add_edge("plan", "execute")
    graph.add_edge("execute", "replan")
    graph.add_conditional_edges("replan", after_replan)
    graph.add_edge("final", END)
    return graph.compile(checkpointer=checkpointer, name="plan_execute")
