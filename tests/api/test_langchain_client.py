"""`langchain-openai`'s ChatOpenAI against the real server, as a LangChain user writes it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_openai import ChatOpenAI
from pydantic import BaseModel, SecretStr

from tests.conftest import scripted_server

REPLIES = [
    {"when": "capital", "content": "Paris is the capital of France.", "repeat": True},
    {"when": "largest city", "content": '{"city": "Paris", "population": 2100000}', "repeat": True},
]


class City(BaseModel):
    city: str
    population: int


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChatOpenAI]:
    with scripted_server(tmp_path_factory.mktemp("langchain"), REPLIES) as live:
        yield ChatOpenAI(
            model="scripted",
            base_url=f"{live.url}/v1",
            api_key=SecretStr(live.token()),
            max_retries=0,
        )


def test_invoke_stream_and_ainvoke(chat: ChatOpenAI) -> None:
    assert chat.invoke("What is the capital of France?").content == (
        "Paris is the capital of France."
    )
    pieces = [chunk.content for chunk in chat.stream("The capital of France?")]
    assert "".join(str(p) for p in pieces) == "Paris is the capital of France."
    assert len([p for p in pieces if p]) > 1


async def test_ainvoke(chat: ChatOpenAI) -> None:
    reply = await chat.ainvoke("And the capital of France, asynchronously?")
    assert reply.content == "Paris is the capital of France."
    assert reply.usage_metadata is not None and reply.usage_metadata["output_tokens"] == 6


def test_with_structured_output_json_schema(chat: ChatOpenAI) -> None:
    structured = chat.with_structured_output(City, method="json_schema")
    assert structured.invoke("The largest city of France?") == City(
        city="Paris", population=2_100_000
    )
