"""The smart router's decisions for a table of messages."""

from __future__ import annotations

import pytest

from backend.core.router import Agent, AgentType, decide_route, model_classifier
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
    assert "score" in decision.reason


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
    assert "the model classified it as plan_execute" in decision.reason
    assert "average" in decision.reason and "the session has files" in decision.reason
    assert model.prompts[0].startswith("[stage: route]")


async def test_an_unusable_classification_falls_back_to_the_score() -> None:
    llm, _ = scripted_llm(["I think it is react maybe"])
    decision = await decide_route(
        "auto", "the total?", has_files=True, classify=model_classifier(llm)
    )
    assert decision.agent_type == "react" and "did not say" in decision.reason

    async def broken(message: str) -> Agent | None:
        raise RuntimeError("the model is down")

    decision = await decide_route("auto", "show the data", has_files=True, classify=broken)
    assert decision.agent_type == "react" and "the model failed" in decision.reason


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
