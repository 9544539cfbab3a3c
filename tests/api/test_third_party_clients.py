"""Independent OpenAI clients: the async `openai` SDK, and LiteLLM.

LiteLLM is the client open-interpreter already uses, so it runs from that
project's own venv (`make openinterpreter`), exactly as a user's script would.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import openai
import pytest
from pydantic import BaseModel

from tests.conftest import scripted_server
from tests.support.live_server import ROOT, LiveServer

REPLIES = [
    {"when": "capital", "content": "Paris is the capital of France.", "repeat": True},
    {"when": "largest city", "content": '{"city": "Paris"}', "repeat": True},
]
LITELLM = ROOT / ".venv-openinterpreter" / "bin" / "python"
LITELLM_SCRIPT = """
import json, sys
import litellm
base, key = sys.argv[1], sys.argv[2]
reply = litellm.completion(model="openai/scripted", api_base=base, api_key=key,
                           messages=[{"role": "user", "content": "The capital of France?"}])
pieces = [c.choices[0].delta.content or "" for c in litellm.completion(
    model="openai/scripted", api_base=base, api_key=key, stream=True,
    messages=[{"role": "user", "content": "The capital, streamed?"}])]
print(json.dumps({"text": reply.choices[0].message.content, "streamed": "".join(pieces)}))
"""


class City(BaseModel):
    city: str


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(tmp_path_factory.mktemp("clients"), REPLIES) as live:
        yield live


async def test_the_async_openai_sdk(server: LiveServer) -> None:
    client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=server.token())
    reply = await client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "The capital of France?"}]
    )
    stream = await client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "The capital, streamed?"}],
        stream=True,
    )
    pieces = [chunk.choices[0].delta.content or "" async for chunk in stream if chunk.choices]
    parsed = await client.chat.completions.parse(
        model="scripted",
        messages=[{"role": "user", "content": "The largest city?"}],
        response_format=City,
    )
    response = await client.responses.create(model="scripted", input="The capital, again?")
    await client.close()
    assert reply.choices[0].message.content == "Paris is the capital of France."
    assert "".join(pieces) == "Paris is the capital of France." and len(pieces) > 1
    assert parsed.choices[0].message.parsed == City(city="Paris")
    assert response.output_text == "Paris is the capital of France."


def test_litellm_completion_with_an_openai_api_base(server: LiveServer) -> None:
    assert LITELLM.exists(), "make openinterpreter installs LiteLLM's venv"
    result = subprocess.run(
        [str(LITELLM), "-c", LITELLM_SCRIPT, f"{server.url}/v1", server.token()],
        capture_output=True,
        text=True,
        timeout=120,
        env={"LITELLM_LOCAL_MODEL_COST_MAP": "True", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer == {
        "text": "Paris is the capital of France.",
        "streamed": "Paris is the capital of France.",
    }
