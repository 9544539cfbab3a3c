"""The scripted chat model replays exactly what tests ask for."""

from __future__ import annotations

import pytest
from langchain_core.messages import HumanMessage

from backend.llm.scripted import ScriptedChatModel, ScriptExhausted


def test_replies_come_in_order_then_run_out() -> None:
    model = ScriptedChatModel(replies=["first", "second"])
    assert model.invoke("a").content == "first"
    assert model.invoke("b").content == "second"
    with pytest.raises(ScriptExhausted):
        model.invoke("c")


def test_when_picks_the_matching_reply_and_repeat_keeps_it() -> None:
    model = ScriptedChatModel(
        replies=[
            {"when": "weather", "content": "Sunny.", "repeat": True},
            {"content": "Anything else."},
        ]
    )
    assert model.invoke("what is the weather?").content == "Sunny."
    assert model.invoke([HumanMessage("weather again")]).content == "Sunny."
    assert model.invoke("hello").content == "Anything else."
    with pytest.raises(ScriptExhausted):
        model.invoke("hello")


async def test_streaming_yields_word_tokens_and_usage() -> None:
    model = ScriptedChatModel(replies=["Hello there, friend."])
    chunks = [chunk async for chunk in model.astream("hi")]
    assert [c.content for c in chunks if c.content] == ["Hello", " there,", " friend."]
    usage = [c.usage_metadata for c in chunks if c.usage_metadata]
    assert usage == [{"input_tokens": 1, "output_tokens": 3, "total_tokens": 4}]
