"""Interactive charts (issue 27): a run's Plotly figure and Altair chart, through the APIs.

Each becomes a `chart` event after the run's `execution`, with its JSON spec and PNG in
the session's outputs, kept in the stored turn and carried by the OpenAI stream; nobody
else can read its files.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.conftest import scripted_server
from tests.support.agent_script import react_turn, sse_events, upload
from tests.support.live_server import LiveServer

PNG = b"\x89PNG\r\n\x1a\n"
# A Plotly figure shown with .show(), an Altair chart kept in a variable, a Matplotlib plot
# (still a plain PNG), and a Plotly figure as the last expression.
CHART_CODE = (
    "import altair as alt\nimport matplotlib.pyplot as plt\nimport plotly.express as px\n"
    "px.bar(df1, x='region', y='price', title='Price by region').show()\n"
    "bars = alt.Chart(df1).mark_bar().encode(x='region', y='price', tooltip=['region', 'price'])\n"
    "plt.plot(df1['price'])\n"
    "print('regions:', len(df1))\n"
    "px.line(df1, x='region', y='price')\n"
)
ANSWER = "It drew the 2 regions."


def _turn(tag: str) -> list[dict[str, Any]]:
    review = {"when": ["[stage: review]", tag], "content": '{"answers_question": true}'}
    return [*react_turn(tag, code=CHART_CODE, answer=ANSWER), review]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(
        tmp_path_factory.mktemp("charts"),
        [
            *_turn("Q-CHART-SSE"),
            *_turn("Q-CHART-SDK"),
            *_turn("Q-CHART-PRIVATE"),
            *_turn("Q-CHART-RESPONSES"),
        ],
    ) as live:
        with live.client() as admin:
            created = admin.post("/api/users", json={"username": "eve", "password": "e" * 12})
        assert created.status_code == 201, created.text
        yield live


def test_plotly_and_altair_charts_become_chart_events_with_a_spec_and_a_png(
    server: LiveServer,
) -> None:
    upload(server, "charts")
    body = {"message": "Q-CHART-SSE chart the prices", "session_id": "charts", "stream": True}
    with server.client(timeout=120) as http, http.stream("POST", "/api/chat", json=body) as reply:
        assert reply.status_code == 200
        events = list(sse_events(reply.iter_lines()))

    kinds = [name for name, _ in events]
    assert kinds[:4] == ["router", "tool_call", "code", "execution"]
    execution = dict(events)["execution"]
    charts = [data for name, data in events if name == "chart"]
    plots = [data for name, data in events if name == "plot"]
    assert kinds[4:8] == ["chart", "chart", "chart", "plot"]  # shown before the answer
    assert [c["library"] for c in charts] == ["plotly", "plotly", "vega-lite"]
    sandbox_id = charts[0]["spec_path"].split("_")[1]  # the sandbox's own id of the run
    for number, chart in enumerate(charts, start=1):
        stem = f"outputs/chart_{sandbox_id}_{number}"
        assert chart["run_id"] == execution["run_id"] and chart["tool"] == "python_coder"
        suffix = ".plotly.json" if chart["library"] == "plotly" else ".vl.json"
        assert (chart["spec_path"], chart["png_path"]) == (stem + suffix, stem + ".png")
        assert chart["spec_url"] == f"/api/sessions/charts/files/{chart['spec_path']}"
        assert chart["png_url"] == f"/api/sessions/charts/files/{chart['png_path']}"
        assert {chart["spec_path"], chart["png_path"]} <= set(execution["files"])
    # Matplotlib's figure stays a plot; no chart's PNG is sent as a plot too.
    (plot,) = plots
    assert plot["path"] == f"outputs/plot_{sandbox_id}_1.png"

    with server.client() as http:
        bar, line, vega = (http.get(c["spec_url"]).json() for c in charts)
        images = [http.get(c["png_url"]) for c in charts]
        conversation = http.get("/api/conversations").json()[0]
        stored = http.get(f"/api/conversations/{conversation['id']}").json()["messages"][-1]
    assert bar["data"][0]["type"] == "bar" and bar["layout"]["title"]["text"] == "Price by region"
    assert line["data"][0]["type"] == "scatter" and line["data"][0]["mode"] == "lines"
    assert vega["mark"]["type"] == "bar" and vega["encoding"]["x"]["field"] == "region"
    (rows,) = vega["datasets"].values()
    assert rows == [{"region": "north", "price": 10}, {"region": "south", "price": 30}]
    for image in images:
        assert image.headers["content-type"] == "image/png" and image.content.startswith(PNG)
    # A reload redraws the charts from the stored turn's steps.
    assert [s for s in stored["metadata"]["steps"] if s["type"] == "chart"] == charts

    # The notebook export shows each chart as its PNG, beside Matplotlib's plot.
    with server.client() as http:
        notebook = http.get("/api/sessions/charts/export?format=ipynb").json()
    shown = [
        output["data"]["image/png"]
        for cell in notebook["cells"]
        for output in cell.get("outputs", [])
        if "image/png" in output.get("data", {})
    ]
    assert len(shown) == 4 and all(image.startswith("iVBOR") for image in shown)


def test_an_openai_client_receives_each_charts_png_and_its_answer(server: LiveServer) -> None:
    upload(server, "charts-sdk")
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    stream = client.chat.completions.create(
        model="scripted",
        messages=[{"role": "user", "content": "Q-CHART-SDK chart the prices"}],
        stream=True,
        extra_body={"session_id": "charts-sdk"},
    )
    content, charts = [], []
    final_metadata: dict[str, Any] = {}
    for chunk in stream:
        final_metadata.update((chunk.model_extra or {}).get("metadata") or {})
        step = (chunk.model_extra or {}).get("agent_event")
        if step and step["type"] == "chart":
            charts.append(step)
        elif chunk.choices and chunk.choices[0].delta.content:
            content.append(chunk.choices[0].delta.content)
    assert "".join(content) == ANSWER
    assert [c["library"] for c in charts] == ["plotly", "plotly", "vega-lite"]
    assert [c["png_url"] for c in final_metadata["charts"]] == [c["png_url"] for c in charts]
    with server.client() as http:
        for chart in charts:
            assert http.get(chart["png_url"]).content.startswith(PNG)


def test_another_user_cannot_fetch_a_users_chart_files(server: LiveServer) -> None:
    upload(server, "charts-private")
    body = {"message": "Q-CHART-PRIVATE chart the prices", "session_id": "charts-private"}
    with server.client(timeout=120) as http:
        reply = http.post("/api/chat", json=body)
        assert reply.status_code == 200, reply.text
        files = [f for f in reply.json()["metadata"]["files"] if "/chart_" in f]
        assert len(files) == 6, files
        shown = reply.json()["charts"]  # JSON clients get the charts beside the answer
        assert {c["png_path"] for c in shown} | {c["spec_path"] for c in shown} == set(files)
        for path in files:
            assert http.get(f"/api/sessions/charts-private/files/{path}").status_code == 200
    with server.client(server.token("eve", "e" * 12)) as eve:
        for path in files:
            response = eve.get(f"/api/sessions/charts-private/files/{path}")
            assert response.status_code == 404, (path, response.text)
            assert json.dumps(response.json()).find("chart_") < 0  # nothing about the file


def test_a_responses_client_gets_the_charts_beside_its_answer(server: LiveServer) -> None:
    upload(server, "charts-responses")
    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=server.token(), max_retries=0)
    response = client.responses.create(
        model="scripted",
        input="Q-CHART-RESPONSES chart the prices",
        extra_body={"session_id": "charts-responses"},
    )
    assert response.output_text == ANSWER
    charts = (response.model_extra or {})["charts"]  # our extension; OpenAI's shape is kept
    assert [c["library"] for c in charts] == ["plotly", "plotly", "vega-lite"]
    with server.client() as http:
        assert all(http.get(c["png_url"]).content.startswith(PNG) for c in charts)
