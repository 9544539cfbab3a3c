"""Write the final markdown answer, and never state a number the run did not print.

The model drafts the answer from the run's output. Every number in the draft
must appear in that output, allowing only for rounding (numbers in the question
do not count: "is it above 100?" must not ground "it is 100"):
"3.14" is grounded by "3.14159", "3.15" is not. A draft with an invented
number, or with none of the printed ones, is dropped for an answer built
straight from the output.

A model whose prose cannot be trusted (`ModelProfile.templated_answer`) writes no
answer at all: `printed_answer` puts what the run printed in a short template, so
no answer shows code or output that did not run.

`stream_answer` writes the turn's final answer as the model generates it: each
piece is shown once its numbers are grounded (`GroundedStream`), and an answer
whose draft stated an invented number, or none of the printed ones, is closed
with the output itself.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from contextlib import aclosing

from backend.llm.turn import TurnLLM
from backend.tools.provenance import ungrounded_numbers
from backend.tools.provenance.numbers import claims, numbers_in
from backend.tools.provenance.streaming import GroundedStream
from backend.tools.python_coder import prompts
from backend.tools.python_coder.conversation import Conversation

OnAnswer = Callable[[str], Awaitable[None]]  # a piece of the answer, as it may be shown
PARTIAL = "PARTIAL"  # the model's reply when the run answered only part of the question

# A prompt section header, or the prompt's instructions, repeated back.
_ECHO = re.compile(
    r"^\s*(#{1,3}\s*(INPUT|OUTPUT|FILES)\b|\*\*(Input|Output|Files)\*\*|\[stage:"
    r"|Write the answer in markdown)"
)
_IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")
_MAX_OUTPUT_IN_ANSWER = 3000


def _drops_the_result(draft: str, output: str, files: list[str]) -> bool:
    """The run printed numbers, and the draft states none of them."""
    return bool(numbers_in(output)) and not claims(draft, files)


def plots(files: list[str]) -> list[str]:
    return [name for name in files if name.lower().endswith(_IMAGE_EXTENSIONS)]


def output_answer(output: str, files: list[str]) -> str:
    """An answer made only of what the run printed and the files it wrote."""
    text = output.strip()
    if len(text) > _MAX_OUTPUT_IN_ANSWER:
        text = text[:_MAX_OUTPUT_IN_ANSWER] + "\n…"
    parts = ["**Result**", f"```text\n{text or '(no printed output)'}\n```"]
    images = plots(files)
    if images:
        parts.append("**Plots**\n" + "\n".join(f"![{p.rsplit('/', 1)[-1]}]({p})" for p in images))
    others = [name for name in files if name not in images]
    if others:
        parts.append("**Files**\n" + "\n".join(f"- `{name}`" for name in others))
    parts.append(
        "**Next steps**\n- Ask for a chart of this result.\n"
        "- Ask to break the result down by another column."
    )
    return "\n\n".join(parts)


def _fence(text: str) -> str:
    """A fence longer than any run of backticks in `text`, so the block holds all of it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def printed_answer(output: str, files: list[str], *, link_plots: bool = True) -> str:
    """A small model's answer (`ModelProfile.templated_answer`): what the run printed, in a
    short template, with no word or block of the model's. A lone number is "The result is
    X."; anything else is shown as printed. `link_plots` False: the plots reach the client
    as plot events (the turn's answer), so the answer does not link them."""
    text = output.strip()
    if len(text) > _MAX_OUTPUT_IN_ANSWER:
        text = text[:_MAX_OUTPUT_IN_ANSWER] + "\n…"
    values = numbers_in(text)
    if len(values) == 1 and values[0].start == 0 and values[0].end == len(text):
        parts = [f"The result is {text}."]
    elif text:
        fence = _fence(text)
        parts = ["Here is what the code printed:", f"{fence}text\n{text}\n{fence}"]
    else:
        parts = ["The code ran and printed nothing."]
    images = plots(files)
    if images and link_plots:
        parts.append("\n".join(f"![{p.rsplit('/', 1)[-1]}]({p})" for p in images))
    others = [name for name in files if name not in images]
    if others:
        parts.append("It wrote:\n" + "\n".join(f"- `{name}`" for name in others))
    return "\n\n".join(parts)


def _with_missing_plots(draft: str, files: list[str]) -> str:
    missing = [name for name in plots(files) if name not in draft]
    if not missing:
        return draft
    links = "\n".join(f"![{p.rsplit('/', 1)[-1]}]({p})" for p in missing)
    return f"{draft.rstrip()}\n\n**Plots**\n{links}"


def _without_echo(draft: str) -> str:
    """The draft up to where a small model starts repeating the prompt or itself."""
    kept: list[str] = []
    for line in draft.splitlines():
        repeated = len(line.strip()) > 3 and line.strip() in (k.strip() for k in kept)
        if _ECHO.match(line) or repeated:
            break
        kept.append(line)
    return "\n".join(kept).strip()


async def write_answer(query: str, output: str, files: list[str], llm: TurnLLM) -> str:
    """The model's markdown answer if every number in it is grounded, else `output_answer`."""
    reply = await llm.text("answer", prompts.SYSTEM, prompts.answer(query, output, files))
    draft = _without_echo(reply)
    if (
        not draft
        or ungrounded_numbers(draft, output, files)
        or _drops_the_result(draft, output, files)
    ):
        return output_answer(output, files)
    return _with_missing_plots(draft, files)


def _echoes(piece: str, released: list[str]) -> bool:
    """The model started repeating the prompt, or a line it already wrote."""
    line = piece.strip()
    return bool(_ECHO.match(piece)) or (
        len(line) > 3 and line in (earlier.strip() for earlier in released)
    )


async def stream_answer(
    conversation: Conversation,
    question: str,
    query: str,
    output: str,
    files: list[str],
    on_answer: OnAnswer,
    *,
    partial: bool,
) -> str | None:
    """The turn's answer to `question`, shown through `on_answer` as it is written.

    `partial`: the model may reply PARTIAL (the run answered only part of the
    question); then nothing is shown and None is returned.
    """
    grounded = GroundedStream(output, files, stop=_echoes)
    shown: list[str] = []
    head = ""  # the reply's start, held back while it may still be PARTIAL

    async def show(text: str) -> None:
        if text:
            shown.append(text)
            await on_answer(text)

    partial = deciding = partial and conversation.continues  # a small model gets no way out
    followup = prompts.answer_followup(question, query, output, files, partial)
    stream = conversation.stream(
        "answer",
        followup,
        (lambda: followup)
        if conversation.continues
        else lambda: prompts.answer(question, output, files),
    )
    async with aclosing(stream):
        async for text in stream:
            if deciding:
                head += text
                start = head.lstrip()
                if start.startswith(PARTIAL):
                    return None  # the agent goes on from the run's output
                if not start or PARTIAL.startswith(start):
                    continue
                deciding, text = False, head
            await show(grounded.feed(text))
    if deciding:  # the whole reply was shorter than the word
        await show(grounded.feed(head))
    await show(grounded.close())
    draft = grounded.text.strip()
    if not draft or grounded.withheld or _drops_the_result(draft, output, files):
        await show(("\n\n" if shown else "") + output_answer(output, files))
    return "".join(shown).strip()  # its plots reach the client as plot events
