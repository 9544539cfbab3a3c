"""The ReAct graph: think → act → think … → finish, as a LangGraph `StateGraph`.

Nodes return partial state. `think` asks the model for the next step; `act`
runs the tool (fuzzy-matched by name) and records the observation; `finish`
ends politely when the model never answered: after `max_iterations` actions, or
when it repeats an action it already took. Each step is also written to the
graph's custom stream (`stream_mode="custom"`) so callers can show progress.

Each answer is written once. While no earlier result of the turn is left to
combine, python_coder answers the user's question itself, shown as it is
written, and that answer ends the turn (LangChain's "return directly"); the
model may decline when its run answered only part of the question, and ReAct
then goes on. Later results reach `think` as observations only, and its Final
Answer combines them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer

from backend.core.agents.react import prompts
from backend.core.agents.react.parsing import parse_reply
from backend.core.agents.react.state import ReactState, Step, react_context
from backend.core.agents.tools import AgentTool, ToolContext, ToolResult
from backend.core.events import ToolCall
from backend.llm.turn import LLMCallLimit, TurnLLM
from backend.tools.provenance import ungrounded_numbers

REPEAT_LIMIT = 2  # the same action and input this many times ends the loop
_NOTHING_TO_COMBINE = {"list_files"}  # results that leave one tool's answer the whole answer


def _repeats(steps: list[Step], tool: str, tool_input: str) -> int:
    return sum(1 for s in steps if s["action"] == tool and s["action_input"] == tool_input)


def _polite_ending(state: ReactState, why: str) -> str:
    done = [s for s in state.get("steps", []) if s["ok"]]
    if not done:
        return (
            f"I could not answer this: {why}, and no step succeeded. "
            "Please rephrase or narrow the question."
        )
    last = done[-1]
    return (
        f"I stopped before a final answer ({why}). The last successful step "
        f"({last['action']}: {last['action_input']}) found:\n\n{last['observation']}"
    )


def _grounded(answer: str, steps: list[Step]) -> str:
    """The model's answer, unless it states numbers no observation shows."""
    evidence = "\n".join(s["observation"] for s in steps)
    coded = [s for s in steps if s["action"] == "python_coder" and s["ok"]]
    if coded and ungrounded_numbers(answer, evidence):
        return str(coded[-1]["data"].get("answer") or coded[-1]["observation"])
    return answer


def _small_model_step(question: str, steps: list[Step]) -> dict[str, Any]:
    """A fixed course for models too small to follow the ReAct format.

    A 135M model answers "Action:" prompts with prose, which would end the turn
    with an invented answer. So it hands the question to python_coder (whose
    spec-first generation copes with small models) and answers with its result.
    """
    if not steps:
        thought = "the model is too small for ReAct; python_coder takes the question"
        get_stream_writer()(ToolCall(tool="python_coder", input=question, thought=thought))
        return {"pending": {"thought": thought, "tool": "python_coder", "input": question}}
    last = steps[-1]
    if last["ok"]:
        answer = str(last["data"].get("answer") or last["observation"])
        return {"final_answer": answer, "stop_reason": "answered", "pending": None}
    return {"pending": None, "stop_reason": "tool_failed"}


def _answers_alone(steps: list[Step]) -> bool:
    """No earlier result to combine with, so a tool's answer may be the turn's whole answer."""
    return not any(s["ok"] and s["action"] not in _NOTHING_TO_COMBINE for s in steps)


def build_react_graph(
    tools: Sequence[AgentTool],
    llm: TurnLLM,
    *,
    max_iterations: int = 6,
    checkpointer: Checkpointer = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    by_name = {tool.name: tool for tool in tools}
    names = list(by_name)
    system = prompts.system([(tool.name, tool.description) for tool in tools])

    async def think(state: ReactState) -> dict[str, Any]:
        steps = state.get("steps", [])
        if len(steps) >= max_iterations:
            return {"pending": None, "stop_reason": "max_iterations"}
        if not llm.profile.chooses_tools and "python_coder" in by_name:
            return _small_model_step(state["question"], steps)
        in_head = bool(llm.head)  # the head has the tools and the conversation
        turn = prompts.turn(
            state["question"],
            [] if in_head else state.get("history", []),
            steps,
            state.get("earlier", []),  # the tool steps of earlier turns: the head has no such
            names=names if in_head else None,
        )
        reply = await llm.chat("react", llm.messages(system, turn))
        parsed = parse_reply(reply, names)
        writer = get_stream_writer()
        if parsed.answer is not None:
            return {
                "final_answer": _grounded(parsed.answer, steps),
                "stop_reason": "answered",
                "pending": None,
            }
        tool = parsed.tool or ""
        tool_input = parsed.tool_input if parsed.tool else parsed.unknown_tool or ""
        writer(ToolCall(tool=tool or tool_input, input=parsed.tool_input, thought=parsed.thought))
        return {"pending": {"thought": parsed.thought, "tool": tool, "input": tool_input}}

    async def act(state: ReactState) -> dict[str, Any]:
        pending = state.get("pending") or {}
        steps = state.get("steps", [])
        tool, tool_input = pending.get("tool", ""), pending.get("input", "")
        update: dict[str, Any] = {"pending": None}
        context = ToolContext(
            react=react_context(steps),
            report=get_stream_writer(),
            answer="final" if _answers_alone(steps) else "none",
            partial=llm.profile.chooses_tools,
        )
        action = tool or tool_input
        if not tool:
            result = ToolResult(
                f"Error: there is no tool named {tool_input!r}. Use one of: "
                f"{', '.join(names)}. Please fix your mistakes.",
                False,
            )
            context.ran(action, result)  # no tool ran to report it
        elif (seen := _repeats(steps, tool, tool_input)) >= 1:
            result = ToolResult(
                "You already took this exact action; its observation is above. "
                "Use it, try something different, or give the Final Answer.",
                False,
            )
            context.ran(action, result)
            if seen + 1 >= REPEAT_LIMIT:
                update["stop_reason"] = "repeated_action"
        else:
            try:
                with llm.tool_span(tool):
                    result = await by_name[tool].run(tool_input, context)  # reports itself
            except LLMCallLimit:
                raise  # the turn's limit, not the tool's failure: the runner stops the turn
            except Exception as exc:  # a tool's failure is the model's to react to
                result = ToolResult(f"Error: {exc}. Please fix your mistakes.", False)
                context.ran(action, result)
        step = Step(
            thought=pending.get("thought", ""),
            action=action,
            action_input=tool_input if tool else "",
            observation=result.observation,
            ok=result.ok,
            data=result.data,
        )
        update["steps"] = [step]
        if result.ok and result.data.get("final"):  # its answer was the turn's, and shown
            update.update(final_answer=str(result.data.get("answer") or ""), stop_reason="answered")
        return update

    async def finish(state: ReactState) -> dict[str, Any]:
        update = _ending(state)
        answer = str(update.get("final_answer") or state.get("final_answer") or "")
        update["earlier"] = [prompts.memory(state["question"], state.get("steps", []), answer)]
        return update

    def _ending(state: ReactState) -> dict[str, Any]:
        if state.get("final_answer"):
            return {}
        reason = state.get("stop_reason") or "max_iterations"
        why = {
            "max_iterations": f"the limit of {max_iterations} steps was reached",
            "repeated_action": "the same action kept repeating",
            "tool_failed": "python_coder could not answer it",
        }.get(reason, reason)
        return {"final_answer": _polite_ending(state, why), "stop_reason": reason}

    def after_think(state: ReactState) -> Literal["act", "finish"]:
        return "act" if state.get("pending") else "finish"

    def after_act(state: ReactState) -> Literal["think", "finish"]:
        done = state.get("final_answer") or state.get("stop_reason") == "repeated_action"
        return "finish" if done else "think"

    graph = StateGraph(ReactState)
    graph.add_node("think", think)
    graph.add_node("act", act)
    graph.add_node("finish", finish)
    graph.add_edge(START, "think")
    graph.add_conditional_edges("think", after_think)
    graph.add_conditional_edges("act", after_act)
    graph.add_edge("finish", END)
    return graph.compile(checkpointer=checkpointer, name="react")
