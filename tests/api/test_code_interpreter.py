"""Code written for OpenAI's Code Interpreter, run unchanged with the official SDK against a
live server on the scripted model: files.create, containers, and `/v1/responses` with the
`code_interpreter` tool (its call items, streamed events, images and file citations)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseCodeInterpreterToolCall, ResponseOutputMessage

from tests.conftest import scripted_server
from tests.support.agent_script import react_turn
from tests.support.live_server import LiveServer
from tests.support.processes import descendants

PASSWORD = "a-long-enough-password"
SALES = b"region,amount\nnorth,10\nsouth,32\neast,48\n"
REVIEW = {"when": "[stage: review]", "content": '{"answers_question": true}', "repeat": True}
TOTAL = (
    "import pandas as pd\nsales = pd.read_csv('uploads/sales.csv')\n"
    "print('total', sales['amount'].sum())\n"
)
PLOT = (
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
    "plt.bar(['a', 'b'], [3, 4])\nplt.savefig('outputs/bars.png')\nprint('saved bars')\n"
)
REPLIES: list[dict[str, Any]] = [
    REVIEW,
    *react_turn("CI-TOTAL", TOTAL, "The total amount is 90."),
    *react_turn("CI-AGAIN", TOTAL, "Again, the total amount is 90."),
    *react_turn("CI-STREAM", TOTAL, "Streamed: the total amount is 90."),
    *react_turn("CI-SET", "x = 41\nprint('x is set', x)\n", "x is set to 41."),
    *react_turn("CI-USE", "print('x plus one', x + 1)\n", "x plus one is 42."),
    *react_turn("CI-FIRST", "y = 20\nprint('y is', y)\n", "y is 20."),
    *react_turn("CI-NEXT", "print('y doubled', y * 2)\n", "y doubled is 40."),
    *react_turn("CI-WARM", "print('warm', 7 * 6)\n", "It is warm: 42."),
    *react_turn("CI-PLOT", PLOT, "The chart is saved as bars.png."),
]
INCLUDE: Any = ["code_interpreter_call.outputs"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(tmp_path_factory.mktemp("code-interpreter"), REPLIES) as live:
        yield live


def sdk_client(server: LiveServer, name: str) -> openai.OpenAI:
    with server.client() as admin:
        created = admin.post("/api/users", json={"username": name, "password": PASSWORD})
        assert created.status_code == 201, created.text
    with server.client(server.token(name, PASSWORD)) as http:
        key = http.post("/api/keys", json={"name": "sdk"})
        assert key.status_code == 201, key.text
    return openai.OpenAI(
        base_url=f"{server.url}/v1", api_key=key.json()["key"], max_retries=0, timeout=120
    )


@pytest.fixture(scope="module")
def client(server: LiveServer) -> openai.OpenAI:
    return sdk_client(server, "analyst")


def calls(response: Any) -> list[ResponseCodeInterpreterToolCall]:
    return [item for item in response.output if item.type == "code_interpreter_call"]


def test_a_file_in_an_auto_container_is_analysed(client: openai.OpenAI) -> None:
    data = client.files.create(file=("sales.csv", SALES), purpose="user_data")
    tool: Any = {"type": "code_interpreter", "container": {"type": "auto", "file_ids": [data.id]}}
    response = client.responses.create(
        model="scripted", input="CI-TOTAL: what is the total amount?", tools=[tool], include=INCLUDE
    )
    assert response.status == "completed" and response.output_text == "The total amount is 90."
    [call] = calls(response)
    assert isinstance(call, ResponseCodeInterpreterToolCall) and call.status == "completed"
    # The code run: the model's, after the lines that load the uploads as DataFrames.
    assert call.code is not None and call.code.endswith(TOTAL)
    assert call.container_id.startswith("cntr_")
    assert call.outputs is not None and [o.type for o in call.outputs] == ["logs"]
    assert "total 90" in call.outputs[0].logs  # type: ignore[union-attr]
    assert isinstance(response.output[-1], ResponseOutputMessage)
    cited = response.agent["citations"]  # type: ignore[attr-defined]
    assert [(c["text"], c["kind"]) for c in cited] == [("90", "computed")]
    files = client.containers.files.list(call.container_id).data
    assert [(f.path, f.source) for f in files] == [("/workspace/uploads/sales.csv", "user")]
    # Without `include`, the call's outputs are left out, as OpenAI leaves them.
    again = client.responses.create(
        model="scripted",
        input="CI-AGAIN, please",
        tools=[{"type": "code_interpreter", "container": call.container_id}],
        tool_choice={"type": "code_interpreter"},
    )
    assert [c.outputs for c in calls(again)] == [None] and "90" in again.output_text


def test_streaming_sends_the_code_interpreter_events_in_order(client: openai.OpenAI) -> None:
    data = client.files.create(file=("sales.csv", SALES), purpose="user_data")
    container = client.containers.create(name="streamed", file_ids=[data.id])
    tool: Any = {"type": "code_interpreter", "container": container.id}
    with client.responses.stream(
        model="scripted", input="CI-STREAM the total", tools=[tool], include=INCLUDE
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    kinds = [event.type for event in events]
    expected = [
        "response.created",
        "response.output_item.added",
        "response.code_interpreter_call.in_progress",
        "response.code_interpreter_call_code.delta",
        "response.code_interpreter_call_code.done",
        "response.code_interpreter_call.interpreting",
        "response.code_interpreter_call.completed",
        "response.output_item.done",
        "response.output_text.delta",
        "response.completed",
    ]
    positions = [kinds.index(kind) for kind in expected]
    assert positions == sorted(positions), kinds
    assert [e.sequence_number for e in events] == list(range(len(events)))
    delta = next(e for e in events if e.type == "response.code_interpreter_call_code.delta")
    assert delta.delta.endswith(TOTAL)  # type: ignore[union-attr]
    [call] = calls(final)
    assert call.container_id == container.id and final.output_text.endswith("is 90.")
    done = [e for e in events if e.type == "response.output_item.done"]
    assert done[0].item.model_dump() == call.model_dump()  # type: ignore[union-attr]


def test_a_container_is_reused_and_its_variables_carry_over(client: openai.OpenAI) -> None:
    container = client.containers.create(name="reused")
    tool: Any = {"type": "code_interpreter", "container": container.id}
    first = client.responses.create(model="scripted", input="CI-SET x", tools=[tool])
    second = client.responses.create(
        model="scripted", input="CI-USE x", tools=[tool], include=INCLUDE
    )
    assert calls(first)[0].container_id == calls(second)[0].container_id == container.id
    outputs = calls(second)[0].outputs
    assert outputs is not None and "x plus one 42" in outputs[0].logs  # type: ignore[union-attr]
    assert second.output_text == "x plus one is 42."


def test_continuing_a_response_with_an_auto_container_keeps_its_container(
    client: openai.OpenAI,
) -> None:
    auto: Any = {"type": "code_interpreter", "container": {"type": "auto"}}
    first = client.responses.create(model="scripted", input="CI-FIRST y", tools=[auto])
    second = client.responses.create(
        model="scripted",
        input="CI-NEXT y",
        tools=[auto],
        previous_response_id=first.id,
        include=INCLUDE,
    )
    assert calls(second)[0].container_id == calls(first)[0].container_id
    assert "y doubled 40" in calls(second)[0].outputs[0].logs  # type: ignore[index, union-attr]
    other = client.containers.create(name="elsewhere")
    elsewhere: Any = {"type": "code_interpreter", "container": other.id}
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(
            model="scripted", input="CI-NEXT", tools=[elsewhere], previous_response_id=first.id
        )
    assert refused.value.param == "tools"


def test_a_plot_is_an_image_output_and_a_container_file(
    client: openai.OpenAI, server: LiveServer
) -> None:
    container = client.containers.create(name="plots")
    tool: Any = {"type": "code_interpreter", "container": container.id}
    response = client.responses.create(
        model="scripted", input="CI-PLOT a chart", tools=[tool], include=INCLUDE
    )
    [call] = calls(response)
    urls = [o.url for o in call.outputs or [] if o.type == "image"]  # type: ignore[union-attr]
    files = {f.path: f for f in client.containers.files.list(container.id)}
    plot = files["/workspace/outputs/bars.png"]
    assert plot.source == "assistant"
    # The saved file, and the figure the sandbox keeps of every one left open.
    assert f"{server.url}/v1/containers/{container.id}/files/{plot.id}/content" in urls
    assert all(
        url.startswith(f"{server.url}/v1/containers/{container.id}/files/cfile_") for url in urls
    )
    png = client.containers.files.content.retrieve(plot.id, container_id=container.id).read()
    assert png.startswith(b"\x89PNG") and len(png) == plot.bytes
    message = response.output[-1]
    assert isinstance(message, ResponseOutputMessage)
    annotations = message.content[0].annotations  # type: ignore[union-attr]
    assert {a.type for a in annotations} == {"container_file_citation"}
    [annotation] = [a for a in annotations if a.filename == "bars.png"]  # type: ignore[union-attr]
    assert annotation.file_id == plot.id  # type: ignore[union-attr]
    text = response.output_text
    assert text[annotation.start_index : annotation.end_index] == "bars.png"


def test_another_users_container_or_file_is_not_found(
    client: openai.OpenAI, server: LiveServer
) -> None:
    data = client.files.create(file=("sales.csv", SALES), purpose="user_data")
    container = client.containers.create(name="mine", file_ids=[data.id])
    other = sdk_client(server, "other")
    for container_spec in (container.id, {"type": "auto", "file_ids": [data.id]}):
        tool: Any = {"type": "code_interpreter", "container": container_spec}
        with pytest.raises(openai.NotFoundError):
            other.responses.create(model="scripted", input="CI-TOTAL", tools=[tool])
    missing: Any = {"type": "code_interpreter", "container": "cntr_" + "0" * 32}
    with pytest.raises(openai.NotFoundError):
        client.responses.create(model="scripted", input="CI-TOTAL", tools=[missing])


def test_an_expired_container_ends_its_sandbox_and_is_refused_clearly(
    client: openai.OpenAI, server: LiveServer
) -> None:
    container = client.containers.create(
        name="brief", expires_after={"anchor": "last_active_at", "minutes": 5}
    )
    tool: Any = {"type": "code_interpreter", "container": container.id}
    client.responses.create(model="scripted", input="CI-WARM up", tools=[tool])
    assert sandbox_of(server, container.id)  # its warm sandbox
    with sqlite3.connect(server.data_dir / "app.db") as db:  # as if 6 minutes went by
        db.execute(
            "UPDATE containers SET last_active_at = last_active_at - 360 WHERE id = ?",
            (container.id,),
        )
    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.create(model="scripted", input="CI-TOTAL", tools=[tool])
    assert refused.value.code == "container_expired"
    assert f"Container {container.id} expired" in refused.value.message
    deadline = time.monotonic() + 60
    while sandbox_of(server, container.id):  # discarded as it expired: its processes end
        assert time.monotonic() < deadline, "the expired container's sandbox is still running"
        time.sleep(0.05)
    assert client.containers.retrieve(container.id).status == "expired"
    # Its conversation is kept.
    with server.client(server.token("analyst", PASSWORD)) as http:
        assert any(c["title"] == "brief" for c in http.get("/api/conversations").json())


def sandbox_of(server: LiveServer, container_id: str) -> list[int]:
    """The server's processes that run the container's sandbox (its workspace in argv)."""
    assert server.process is not None
    found = []
    for pid in descendants(server.process.pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue  # ended meanwhile
        if container_id.encode() in argv:
            found.append(pid)
    return found


def test_the_tool_is_refused_with_plain_chat_or_function_tools(client: openai.OpenAI) -> None:
    interpreter: Any = {"type": "code_interpreter", "container": {"type": "auto"}}
    function: Any = {"type": "function", "name": "f", "parameters": {"type": "object"}}
    with pytest.raises(openai.BadRequestError) as mixed:
        client.responses.create(model="scripted", input="hi", tools=[interpreter, function])
    assert mixed.value.param == "tools"
    with pytest.raises(openai.BadRequestError) as chat:
        client.responses.create(
            model="scripted", input="hi", tools=[interpreter], extra_body={"agent_type": "chat"}
        )
    assert chat.value.param == "agent_type"
    with pytest.raises(openai.BadRequestError) as choice:
        client.responses.create(
            model="scripted", input="hi", tools=[function], tool_choice={"type": "code_interpreter"}
        )
    assert choice.value.param == "tool_choice"
