"""The smart router's decisions for a table of messages, and the reasons it gives in plain words."""

from __future__ import annotations

import pytest

from backend.core.router import Agent, AgentType, decide_route, model_classifier
from backend.llm.profile import CAPABLE, SMALL
from tests.support.scripted_llm import scripted_llm


@pytest.mark.parametrize(
    ("message", "has_files", "expected"),
    [
        ("What is the capital of France?", False, "chat"),
        ("Tell me a joke about statisticians", False, "chat"),
        ("Write code to compute the mean of price in sales.csv", False, "react"),
        ("Use pandas to plot a histogram of ages", False, "react"),
        ("Calculate the correlation between the columns", False, "react"),
        ("Search the web for the latest news on llama.cpp", False, "react"),
        (
            "First load sales.csv with pandas, then compute the total per region, "
            "and after that plot a chart",
            False,
            "plan_execute",
        ),
        ("Step by step: clean the CSV, then fit a regression", False, "plan_execute"),
    ],
)
async def test_clear_scores_decide_without_the_model(
    message: str, has_files: bool, expected: Agent
) -> None:
    decision = await decide_route("auto", message, has_files=has_files)
    assert decision.agent_type == expected, decision.reason
    _in_plain_words(decision.reason)


def _in_plain_words(reason: str) -> None:
    """A sentence for the user: none of the router's machinery."""
    assert reason[0].isupper() and reason.endswith("."), reason
    assert not any(word in reason for word in ("score", "cues", "react", "plan_execute")), reason


@pytest.mark.parametrize("requested", ["chat", "react", "plan_execute"])
async def test_an_explicit_agent_type_always_wins(requested: AgentType) -> None:
    decision = await decide_route(requested, "Write python code for the csv, then plot it")
    assert (decision.agent_type, decision.reason) == (requested, "requested explicitly")


async def test_an_unclear_message_asks_the_model_and_says_so() -> None:
    llm, model = scripted_llm(['{"agent": "plan_execute"}'])
    decision = await decide_route(
        "auto", "What is the average?", has_files=True, classify=model_classifier(llm)
    )
    assert decision.agent_type == "plan_execute"
    assert decision.reason == (
        "Your question mentions data (average) and the session has files, but not clearly; "
        "the model judged that it needs several steps, so an agent will plan the steps and "
        "run each one."
    )
    assert model.prompts[0].startswith("[stage: route]")


async def test_an_unusable_classification_falls_back_to_the_score() -> None:
    llm, _ = scripted_llm(["I think it is react maybe"])
    decision = await decide_route(
        "auto", "the total?", has_files=True, classify=model_classifier(llm)
    )
    assert decision.agent_type == "react" and "the model gave no clear choice" in decision.reason

    async def broken(message: str) -> Agent | None:
        raise RuntimeError("the model is down")

    decision = await decide_route("auto", "show the data", has_files=True, classify=broken)
    assert decision.agent_type == "react" and "the model could not be asked" in decision.reason
    assert "the model is down" not in decision.reason  # the log has it, not the user


@pytest.mark.parametrize(
    ("message", "has_files"),
    [("hello there", True), ("count to four", False), ("Tell me about data privacy", False)],
)
async def test_no_cue_or_one_weak_cue_without_files_is_chat_without_asking(
    message: str, has_files: bool
) -> None:
    async def never(message: str) -> Agent | None:
        raise AssertionError("the classifier must not be asked")

    decision = await decide_route("auto", message, has_files=has_files, classify=never)
    assert decision.agent_type == "chat" and "a plain question" in decision.reason


async def _never(message: str) -> Agent | None:
    raise AssertionError("the classifier must not be asked")


@pytest.mark.parametrize(
    "message",
    [
        "Which region had the highest total revenue?",  # issue 39: it went to chat
        "show me the rows",
        "What about the north?",
        "Hello, which month sold the most?",
    ],
)
async def test_a_small_model_with_files_runs_code_for_data_questions_without_asking(
    message: str,
) -> None:
    llm, model = scripted_llm(['{"agent": "chat"}'])  # what the embedded model answered
    llm.backend.profile = SMALL
    decision = await decide_route(
        "auto",
        message,
        has_files=True,
        classify=model_classifier(llm),
        routes_itself=llm.profile.routes_itself,
    )
    assert decision.agent_type == "react"
    assert decision.reason == "With files here and a small model, data questions always run code."
    assert model.prompts == []  # the model was not asked


@pytest.mark.parametrize("message", ["hello there", "Thanks!", "who are you?", "👍"])
async def test_a_small_model_with_files_still_chats_for_small_talk(message: str) -> None:
    decision = await decide_route(
        "auto", message, has_files=True, classify=_never, routes_itself=SMALL.routes_itself
    )
    assert decision.agent_type == "chat"
    _in_plain_words(decision.reason)


async def test_a_capable_model_with_files_is_still_asked_about_an_unclear_question() -> None:
    llm, model = scripted_llm(['{"agent": "chat"}'])
    decision = await decide_route(
        "auto",
        "Which region had the highest total revenue?",
        has_files=True,
        classify=model_classifier(llm),
        routes_itself=CAPABLE.routes_itself,
    )
    assert decision.agent_type == "chat" and len(model.prompts) == 1
    assert decision.reason == (
        "Your question mentions data (total) and the session has files, but not clearly; "
        "the model judged that it is a plain question, so it is answered directly."
    )


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        # "first" and "next" as adjectives are no steps (the router counted them before).
        ("Use pandas to show the first 10 rows and the next 10 rows of sales.csv", "react"),
        ("Show me the first 10 rows of the table in sales.csv", "react"),
        ("Load sales.csv with pandas, then plot the sales", "plan_execute"),
    ],
)
async def test_steps_are_read_by_the_same_recogniser_plan_execute_splits_with(
    message: str, expected: Agent
) -> None:
    decision = await decide_route("auto", message, classify=_never)
    assert decision.agent_type == expected, decision.reason
