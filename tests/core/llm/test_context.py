"""Fitting a prompt into the window: what goes first, and what never goes."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from backend.llm.context import (
    ContextOverflow,
    answer_reserve,
    estimate_messages,
    estimate_tokens,
    fit_messages,
    trimmed_message,
    upstream_cut,
)
from tests.support.truncating_ollama import tokens as standin_tokens


def test_the_estimate_is_never_below_the_standin_tokenizer() -> None:
    samples = [
        "The total revenue per region was 1,234,567.89 in 2024.",
        "def f(x):\n    return df1['price'].sum() / len(x)\n",
        "internationalization und Donaudampfschifffahrtsgesellschaft",
        "区域 收入 总计",
    ]
    for text in samples:
        assert estimate_tokens(text) >= standin_tokens(text)
    assert estimate_tokens("12345") == 5  # a digit is a token


def _history(pairs: int, size: int = 400) -> list[AIMessage | HumanMessage]:
    messages: list[AIMessage | HumanMessage] = []
    for n in range(pairs):
        messages.append(HumanMessage(f"question {n} " + "word " * size))
        messages.append(AIMessage(f"answer {n} " + "word " * size))
    return messages


def test_the_oldest_messages_go_first_and_the_system_and_question_stay() -> None:
    system = SystemMessage("You analyse data. Tools: python_coder. METADATA: sales.csv")
    question = HumanMessage("Q-LAST which region sold most?")
    messages = [system, *_history(10), question]
    fit = fit_messages(messages, window=4096, reserve=1024)
    assert fit.messages[0] == system and fit.messages[-1] == question
    assert fit.dropped_messages > 0 and fit.tokens <= 4096 - 1024
    kept = fit.messages[1:-1]
    assert kept == messages[1:-1][fit.dropped_messages :]  # the newest history stays, in order
    assert "older message" in trimmed_message(4096, fit)


def test_a_prompt_that_fits_is_sent_as_it_is() -> None:
    messages = [SystemMessage("short"), HumanMessage("hello")]
    fit = fit_messages(messages, window=4096, reserve=1024)
    assert fit.messages is messages and not fit.trimmed


def test_a_call_leaves_with_its_results() -> None:
    call = AIMessage("", tool_calls=[{"name": "python_coder", "args": {"q": "x"}, "id": "c1"}])
    result = ToolMessage("output " * 600, tool_call_id="c1")
    messages = [SystemMessage("sys"), call, result, AIMessage("later"), HumanMessage("Q now")]
    fit = fit_messages(messages, window=1024, reserve=256)
    assert fit.dropped_messages == 2
    assert not any(isinstance(m, ToolMessage) for m in fit.messages)


def test_older_parts_of_the_last_message_go_oldest_first() -> None:
    steps = [f"Thought: step {n}\nObservation: " + "row " * 300 for n in range(6)]
    prompt = "\n\n".join(
        ["[stage: react]", "Question: Q-7 total per region?", *steps, "What next?"]
    )
    fit = fit_messages(
        [SystemMessage("sys"), HumanMessage(prompt)], 2048, 512, question="Q-7 total per region?"
    )
    text = str(fit.messages[-1].content)
    assert text.startswith("[stage: react]") and text.endswith("What next?")
    assert "Question: Q-7 total per region?" in text
    assert "step 5" in text and "step 0" not in text  # the newest observation stays
    assert "older parts left out to fit the model's context window" in text
    assert fit.dropped_parts >= 1 and fit.tokens <= 2048 - 512


def test_what_must_stay_but_cannot_fit_is_refused() -> None:
    system = SystemMessage("METADATA " + "column " * 3000)
    with pytest.raises(ContextOverflow) as raised:
        fit_messages([system, HumanMessage("Q")], window=2048, reserve=512)
    assert raised.value.window == 2048 and raised.value.needed > 2048 - 512


def test_the_answer_keeps_its_room() -> None:
    assert answer_reserve(8192, 500) == 500
    assert answer_reserve(4096, 4000) == 1024  # at most a quarter of the window
    assert answer_reserve(4096, None) == 1024


def test_a_server_that_read_less_than_it_was_sent_cut_it() -> None:
    assert upstream_cut(sent=6000, reported=4096, budget=7000, exact=True)
    assert upstream_cut(sent=9000, reported=4096, budget=7000, exact=False)
    assert upstream_cut(sent=3000, reported=7100, budget=7000, exact=False)  # filled the window
    assert not upstream_cut(sent=3000, reported=2400, budget=7000, exact=False)
    assert not upstream_cut(sent=3000, reported=0, budget=7000, exact=True)  # no usage given
    assert estimate_messages([HumanMessage("hi")]) == 1 + 8
