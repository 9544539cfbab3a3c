"""The ReAct prompt: the tools, the format, and the steps so far."""

from __future__ import annotations

from collections.abc import Sequence

from backend.core.agents.react.state import Step

SYSTEM = """You answer questions, using tools when you need data or computation.
Tools:
{tools}

{format}"""

FORMAT = """Use exactly this format:
Thought: what to do next
Action: one tool name from [{names}]
Action Input: the input for the tool

After each action you get an Observation. When you know the answer:
Thought: I know the answer
Final Answer: the answer, using only facts from the observations"""


def system(tools: Sequence[tuple[str, str]]) -> str:
    listing = "\n".join(f"- {name}: {description}" for name, description in tools)
    return SYSTEM.format(tools=listing, format=answer_format([name for name, _ in tools]))


def answer_format(names: Sequence[str]) -> str:
    return FORMAT.format(names=", ".join(names))


def turn(
    question: str,
    history: list[tuple[str, str]],
    steps: list[Step],
    earlier: Sequence[str] = (),
    names: Sequence[str] | None = None,
) -> str:
    """`names`: the tools, when the turn's head stands in for `system` (the format comes here)."""
    parts = ["[stage: react]"]
    if names is not None:
        parts.append(answer_format(names))
    if earlier:
        parts.append("Earlier turns in this session:\n" + "\n".join(earlier[-3:]))
    if history:
        earlier = "\n".join(f"{role}: {content[:300]}" for role, content in history[-10:])
        parts.append(f"Conversation so far:\n{earlier}")
    parts.append(f"Question: {question}")
    for step in steps:
        parts.append(
            f"Thought: {step['thought']}\nAction: {step['action']}\n"
            f"Action Input: {step['action_input']}\nObservation: {step['observation']}"
        )
    parts.append("What next? Reply with Thought and Action, or with Final Answer.")
    return "\n\n".join(parts)


def memory(question: str, steps: list[Step], answer: str) -> str:
    """One line that remembers a finished turn for the next ones."""
    done = "; ".join(
        f"{s['action']}({s['action_input'][:80]}) → {_first_line(s['observation'])[:120]}"
        for s in steps
    )
    return f"Q: {question[:200]} | steps: {done or 'none'} | A: {answer[:300]}"


def _first_line(text: str) -> str:
    """The observation's first line that says something ("Output:" is only a heading)."""
    lines = [line for line in text.strip().splitlines() if line.strip() not in ("", "Output:")]
    return lines[0] if lines else ""
