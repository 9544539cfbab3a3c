"""Fitting a prompt into the model's context window, by our own rules.

A model's server cuts a prompt that does not fit its window without saying so:
Ollama drops the older messages, then all but the first few tokens of what is
left, and answers 200 as if nothing happened. So every prompt is measured before
it is sent (the backend's own tokenizer where it has one, else a conservative
estimate) and, when it would not leave room for the answer, fitted here:

1. The oldest messages between the system messages and the last one go first,
   in whole exchanges (a call and its results leave together).
2. Then the older parts (paragraphs) of the last message: earlier observations,
   the conversation so far, earlier turns, oldest first, each replaced by one line
   saying what was left out.

The system messages (the system prompt, the tools, the files' metadata), the
last message's first and last parts (the stage and its instruction), every part
that holds the question, and the sections a stage cannot do without (METADATA,
DATA SOURCES, INPUT, TASK, RULES) never go. If the prompt still does not fit, the call is
refused with `ContextOverflow` rather than sent to be cut.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from backend.llm.stream import Event

Counter = Callable[[list[BaseMessage]], int]

# The tokens a chat template adds around each message (role markers, separators).
MESSAGE_OVERHEAD = 8
# Room kept for the answer, at most this share of the window: a stage's own cap is
# often larger than what a small window can spare.
ANSWER_SHARE = 0.25
# Sections that a stage cannot do without (the coder's prompts name them so).
_KEPT_SECTIONS = (
    "## INPUT",
    "## TASK",
    "## METADATA",
    "## DATA SOURCES",
    "## RULES",
    "Question:",
)
_PIECES = re.compile(r"[A-Za-z]+|\d|\n+|[ \t]{2,}|[^\sA-Za-z\d]")
# A server that read less than this share of what we measured has cut the prompt: an
# estimate runs at most about a third over a real tokenizer on prose, code and numbers.
_READ_SHARE_EXACT = 0.9
_READ_SHARE_ESTIMATED = 0.55
_PART_BREAK = "\n\n"


def estimate_tokens(text: str) -> int:
    """At least as many tokens as common BPE tokenizers make of `text`.

    A letter run counts one token per four letters (a word is rarely fewer, common
    words are one), every digit one (Qwen and others split numbers into digits),
    every other visible character one, each line break one, and each run of spaces
    (indentation) one.
    """
    count = 0
    for piece in _PIECES.findall(text):
        count += math.ceil(len(piece) / 4) if piece[0].isalpha() else 1
    return count


def estimate_messages(messages: Sequence[BaseMessage]) -> int:
    """`estimate_tokens` of every message's text, with the template's overhead."""
    return sum(estimate_tokens(_text(m)) + MESSAGE_OVERHEAD for m in messages)


class ContextFitted(Event):
    """A prompt was made to fit the model's window, or the upstream cut one anyway."""

    type: Literal["context"] = "context"
    stage: str
    window: int  # the model's context window, in tokens
    prompt_tokens: int  # the prompt as sent (measured, or estimated)
    dropped_messages: int = 0  # older messages left out
    dropped_parts: int = 0  # older parts of the last message left out
    cut_upstream: bool = False  # the server reported fewer prompt tokens than were sent
    reported_tokens: int | None = None  # what the server said it read, when cut
    message: str


class ContextOverflow(Exception):
    """The parts of a prompt that may not be left out do not fit the window."""

    def __init__(self, needed: int, window: int, reserve: int) -> None:
        super().__init__(
            f"the prompt needs {needed} tokens, and the model's context window of {window} "
            f"leaves {window - reserve} after {reserve} for the answer"
        )
        self.needed = needed
        self.window = window
        self.reserve = reserve


@dataclass(frozen=True)
class Fit:
    messages: list[BaseMessage]
    tokens: int
    dropped_messages: int = 0
    dropped_parts: int = 0

    @property
    def trimmed(self) -> bool:
        return bool(self.dropped_messages or self.dropped_parts)


def answer_reserve(window: int, wanted: int | None) -> int:
    """The tokens kept free for the answer: the call's cap, at most a quarter of the window."""
    share = int(window * ANSWER_SHARE)
    return min(wanted, share) if wanted else share


@dataclass(frozen=True)
class Measured:
    """A prompt as it is sent: its tokens (tool schemas included), and what the window
    left for it once the answer had its room."""

    tokens: int
    budget: int
    window: int
    exact: bool  # counted with the model's own tokenizer

    def cut_by(self, reported: int) -> bool:
        """Whether a server that says it read `reported` prompt tokens cut this prompt."""
        return upstream_cut(self.tokens, reported, self.budget, self.exact)


def schema_tokens(tools: list[Any] | None) -> int:
    """The estimated tokens of native tool schemas, which the server adds to the prompt."""
    return estimate_tokens(json.dumps(tools)) if tools else 0


def fit_prompt(
    messages: list[BaseMessage],
    window: int,
    count: Counter,
    exact: bool,
    *,
    wanted: int | None,
    tools: list[Any] | None = None,
    question: str = "",
) -> tuple[Fit, Measured]:
    """`messages` fitted with room for an answer of `wanted` tokens (see `answer_reserve`),
    and the prompt as measured; raises `ContextOverflow` like `fit_messages`."""
    reserve = answer_reserve(window, wanted)
    schemas = schema_tokens(tools)
    fit = fit_messages(messages, window, reserve, count, question=question, extra=schemas)
    return fit, Measured(fit.tokens + schemas, window - reserve, window, exact)


def fit_messages(
    messages: list[BaseMessage],
    window: int,
    reserve: int,
    count: Counter = estimate_messages,
    *,
    question: str = "",
    extra: int = 0,
) -> Fit:
    """`messages` fitted into `window` less `reserve` (and `extra`: tool schemas);
    raises `ContextOverflow` when what must stay does not fit."""
    budget = window - reserve - extra
    tokens = count(messages)
    if tokens <= budget:
        return Fit(messages, tokens)
    fitted, dropped = _drop_older_messages(messages, budget, count)
    tokens = count(fitted)
    parts = 0
    if tokens > budget and fitted and not isinstance(fitted[-1], SystemMessage):
        last, parts = _drop_older_parts(fitted[-1], fitted[:-1], budget, count, question)
        fitted = [*fitted[:-1], last]
        tokens = count(fitted)
    if tokens > budget:
        raise ContextOverflow(tokens + extra, window, reserve)
    return Fit(fitted, tokens, dropped, parts)


def _drop_older_messages(
    messages: list[BaseMessage], budget: int, count: Counter
) -> tuple[list[BaseMessage], int]:
    """Whole exchanges between the system messages and the last message, oldest first."""
    lead = 0
    while lead < len(messages) - 1 and isinstance(messages[lead], SystemMessage):
        lead += 1
    head, middle, last = messages[:lead], messages[lead:-1], messages[-1:]
    dropped = 0
    while middle and count([*head, *middle, *last]) > budget:
        size = _exchange(middle)
        middle = middle[size:]
        dropped += size
    return [*head, *middle, *last], dropped


def _exchange(messages: list[BaseMessage]) -> int:
    """How many messages the oldest exchange takes: a call with its results, else one."""
    first = messages[0]
    if isinstance(first, AIMessage) and first.tool_calls:
        size = 1
        while size < len(messages) and isinstance(messages[size], ToolMessage):
            size += 1
        return size
    size = 1
    while size < len(messages) and isinstance(messages[size], ToolMessage):
        size += 1  # results whose call went before
    return size


def _drop_older_parts(
    last: BaseMessage,
    before: list[BaseMessage],
    budget: int,
    count: Counter,
    question: str,
) -> tuple[BaseMessage, int]:
    """The last message with its older parts left out, oldest first, until it fits."""
    parts = _text(last).split(_PART_BREAK)
    droppable = [
        index for index in range(1, len(parts) - 1) if not _must_stay(parts[index], question)
    ]
    gone: set[int] = set()
    current = last
    for index in droppable:
        if count([*before, current]) <= budget:
            break
        gone.add(index)
        current = last.model_copy(update={"content": _joined(parts, gone)})
    return current, len(gone)


def _must_stay(part: str, question: str) -> bool:
    stripped = part.lstrip()
    if stripped.startswith(_KEPT_SECTIONS):
        return True
    probe = question.strip()[:200]
    return bool(probe) and probe in part


def _joined(parts: list[str], gone: set[int]) -> str:
    """The parts that stay, with one line where a run of parts was left out."""
    kept: list[str] = []
    run = 0
    for index, part in enumerate(parts):
        if index in gone:
            run += 1
            continue
        if run:
            kept.append(_left_out(run))
            run = 0
        kept.append(part)
    if run:
        kept.append(_left_out(run))
    return _PART_BREAK.join(kept)


def _left_out(parts: int) -> str:
    noun = "part" if parts == 1 else "parts"
    return f"[{parts} older {noun} left out to fit the model's context window]"


def _text(message: BaseMessage) -> str:
    content = message.content
    return content if isinstance(content, str) else str(message.text)


def trimmed_notice(stage: str, window: int, fit: Fit, tokens: int) -> ContextFitted:
    """The turn's note of a fitted prompt (`tokens`: as sent, tool schemas included)."""
    return ContextFitted(
        stage=stage,
        window=window,
        prompt_tokens=tokens,
        dropped_messages=fit.dropped_messages,
        dropped_parts=fit.dropped_parts,
        message=trimmed_message(window, fit),
    )


def cut_notice(stage: str, window: int, sent: int, reported: int) -> ContextFitted:
    """The turn's note of a prompt the upstream read less of than it was sent."""
    return ContextFitted(
        stage=stage,
        window=window,
        prompt_tokens=sent,
        cut_upstream=True,
        reported_tokens=reported,
        message=cut_message(window, sent, reported),
    )


def trimmed_message(window: int, fit: Fit) -> str:
    """What the user is told when a prompt was fitted."""
    left: list[str] = []
    if fit.dropped_messages:
        plural = "s" if fit.dropped_messages != 1 else ""
        left.append(f"{fit.dropped_messages} older message{plural}")
    if fit.dropped_parts:
        plural = "s" if fit.dropped_parts != 1 else ""
        left.append(f"{fit.dropped_parts} older step{plural} or note{plural}")
    verb = "was" if len(left) == 1 and fit.dropped_messages + fit.dropped_parts == 1 else "were"
    return (
        f"To fit the model's context window of {window:,} tokens, "
        f"{' and '.join(left)} {verb} left out of what the model read."
    )


def cut_message(window: int, sent: int, reported: int) -> str:
    """What the user is told when the upstream read less than it was sent."""
    return (
        f"The model's server read {reported:,} prompt tokens where about {sent:,} were sent "
        f"(window {window:,}): it may have cut the prompt. Raise the model's context window "
        "(OLLAMA_NUM_CTX, or the server's own setting) if answers miss earlier context."
    )


def upstream_cut(sent: int, reported: int, budget: int, exact: bool) -> bool:
    """Whether the server's reported prompt size says it cut what was sent.

    A prompt we fitted never fills the window: one reported past the prompt's budget
    was longer than we measured, and the server cut it (Ollama reports the window
    itself). Far fewer tokens than were sent says the same: a server that loaded the
    model with a smaller window than it was asked for. (Ollama, llama.cpp and vLLM
    report the whole prompt, cached prefix included.)
    """
    if reported <= 0:
        return False
    if reported > budget:
        return True
    share = _READ_SHARE_EXACT if exact else _READ_SHARE_ESTIMATED
    return reported < share * sent
