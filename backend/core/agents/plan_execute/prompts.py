"""The planner's, replanner's and final answer's prompts."""

from __future__ import annotations

from collections.abc import Sequence

from backend.core.agents.plan_execute.state import StepResult


def _tools(tools: Sequence[tuple[str, str]]) -> str:
    return "\n".join(f"- {name}: {description}" for name, description in tools)


def _results(results: Sequence[StepResult]) -> str:
    return "\n\n".join(
        f"Step {n}: {r['goal']} ({r['tool']}, {'done' if r['ok'] else 'failed'})\n"
        f"{r['observation'][:1500]}"
        for n, r in enumerate(results, start=1)
    )


def plan(question: str, tools: Sequence[tuple[str, str]]) -> str:
    return (
        f"[stage: plan]\n## INPUT\n{question}\n## TOOLS\n{_tools(tools)}\n"
        "## TASK\nWrite a short plan (at most 6 steps) that answers INPUT. Each step has a "
        "goal, the tool that does it, and a success criterion. Reply with JSON: "
        '{"steps": [{"goal": "...", "tool": "...", "success_criterion": "..."}]}'
    )


def replan(
    question: str, remaining: Sequence[dict[str, str]], results: Sequence[StepResult]
) -> str:
    left = "\n".join(f"- {step['goal']} ({step['tool']})" for step in remaining) or "(none)"
    return (
        f"[stage: replan]\n## INPUT\n{question}\n## DONE\n{_results(results)}\n"
        f"## REMAINING PLAN\n{left}\n## TASK\nGiven what the steps found, should the plan "
        "continue as it is, be revised (give the new remaining steps), or finish because "
        'INPUT is answered? Reply with JSON: {"decision": "continue" or "revise" or '
        '"finish", "steps": [...], "reason": "..."}'
    )


def answer(question: str, results: Sequence[StepResult]) -> str:
    return (
        f"[stage: final]\n## INPUT\n{question}\n## STEPS\n{_results(results)}\n"
        "## TASK\nAnswer INPUT from what the steps found. Use only numbers that appear "
        "in STEPS."
    )


def step_context(
    question: str,
    plan_steps: Sequence[dict[str, str]],
    index: int,
    results: Sequence[StepResult] = (),
) -> str:
    """The PLANS section python_coder sees: the whole plan, which step this is, and what
    the earlier steps found (their output goes to this step directly)."""
    lines = [f"Overall question: {question}"]
    for n, step in enumerate(plan_steps, start=1):
        marker = "→" if n == index else " "
        lines.append(f"{marker} {n}. {step['goal']} (success: {step.get('success_criterion', '')})")
    for n, result in enumerate(results, start=1):
        state = "found" if result["ok"] else "failed"
        lines.append(f"Step {n} {state}:\n{result['observation'][:800]}")
    return "\n".join(lines)
