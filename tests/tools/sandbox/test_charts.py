"""Interactive charts in the sandbox (issue 27): which a run displays, and what it writes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from backend.storage.workspaces import Workspaces
from backend.tools.python_coder import prompts
from backend.tools.sandbox.availability import SandboxStatus
from backend.tools.sandbox.chart_files import ChartFiles, chart_files
from backend.tools.sandbox.executor import ExecutorLimits, SandboxedExecutor

PNG = b"\x89PNG\r\n\x1a\n"
LIMITS = ExecutorLimits(timeout=30, max_memory_mb=1024, max_file_mb=0.2)


@pytest.fixture
async def executor(tmp_path: Path) -> AsyncIterator[SandboxedExecutor]:
    workspace = Workspaces(tmp_path).ensure("u1-charts")
    async with SandboxedExecutor(workspace, LIMITS, SandboxStatus("bwrap", "test")) as running:
        yield running  # type: ignore[misc]


def _read(executor: SandboxedExecutor, path: str) -> bytes:
    return (executor.workspace / path).read_bytes()


async def test_a_run_shows_the_charts_it_displayed_once_each_and_matplotlib_stays_a_plot(
    executor: SandboxedExecutor,
) -> None:
    assert (await executor.run("import plotly.graph_objects as go\nold = go.Figure()")).success
    code = (
        "import altair as alt\nimport matplotlib.pyplot as plt\nimport pandas as pd\n"
        "import plotly.express as px\nimport plotly.io as pio\n"
        "shown = px.bar(x=['a', 'b'], y=[1, 2])\nshown.show()\n"
        "pio.show(px.scatter(x=[1], y=[2]))\n"  # its browser renderer would wait: shown here
        "frame = pd.DataFrame({'k': ['a', 'b', 'a'], 'v': [1, 2, 3]})\n"
        "chart = alt.Chart(frame).mark_line().encode(x='k', y='sum(v)', color='k')\n"
        "again = shown\n"  # the same figure under another name: shown once
        "plt.plot([1, 2])\n"
        "old.layout.title = 'changed, not shown'\n"
        "px.pie(names=['x', 'y'], values=[3, 4])\n"
    )
    result = await executor.run(code)
    assert result.success, result.error
    charts = chart_files(result.files)
    assert [c.library for c in charts] == ["plotly", "plotly", "plotly", "vega-lite"]
    stem = charts[0].spec_path.split("_")[1]
    assert [c.spec_path for c in charts] == [
        f"outputs/chart_{stem}_1.plotly.json",
        f"outputs/chart_{stem}_2.plotly.json",
        f"outputs/chart_{stem}_3.plotly.json",
        f"outputs/chart_{stem}_4.vl.json",
    ]
    bar, scatter, pie, line = (json.loads(_read(executor, c.spec_path)) for c in charts)
    assert bar["data"][0]["type"] == "bar" and pie["data"][0]["type"] == "pie"
    assert scatter["data"][0]["type"] == "scatter"
    assert line["mark"]["type"] == "line" and line["encoding"]["y"]["aggregate"] == "sum"
    for chart in charts:
        assert _read(executor, chart.png_path).startswith(PNG)
    assert f"outputs/plot_{stem}_1.png" in result.figures  # Matplotlib, as before
    assert result.stderr == ""


async def test_what_the_png_cannot_draw_and_what_cannot_be_a_chart_are_said(
    executor: SandboxedExecutor,
) -> None:
    code = (
        "import altair as alt\nimport pandas as pd\nimport plotly.graph_objects as go\n"
        "heat = go.Figure(go.Heatmap(z=[[1, 2], [3, 4]]))\n"  # drawn live; the PNG says so
        "big = go.Figure(go.Scatter(x=list(range(20000)), y=list(range(20000))))\n"
        "rows = alt.Chart(pd.DataFrame({'x': range(6000)})).mark_point().encode(x='x')\n"
    )
    result = await executor.run(code)
    assert result.success, result.error
    (heat,) = chart_files(result.files)
    assert heat.library == "plotly" and _read(executor, heat.png_path).startswith(PNG)
    # A spec past the file size limit is not sent to browsers: its PNG is an ordinary plot.
    stem = heat.spec_path.split("_")[1]
    assert f"outputs/plot_{stem}_chart2.png" in result.files
    assert not any(f.startswith(f"outputs/chart_{stem}_2") for f in result.files)
    # Altair refuses more than 5,000 rows inline: the run stands, and says why.
    assert "The vega-lite chart could not be shown" in result.stderr
    assert "5000" in result.stderr


async def test_a_failed_run_shows_no_chart(executor: SandboxedExecutor) -> None:
    result = await executor.run("import plotly.express as px\nfig = px.line(y=[1, 2])\n1 / 0")
    assert not result.success
    assert chart_files(result.files) == []
    assert not list((executor.workspace / "outputs").glob("chart_*"))


def test_chart_files_pairs_each_spec_with_its_png() -> None:
    files = [
        "outputs/chart_ab12_1.plotly.json",
        "outputs/chart_ab12_1.png",
        "outputs/chart_ab12_2.vl.json",  # no PNG: not a chart
        "outputs/chart_ab12_3.vl.json",
        "outputs/chart_ab12_3.png",
        "outputs/other.plotly.json",
        "outputs/plot_ab12_1.png",
    ]
    assert chart_files(files) == [
        ChartFiles("plotly", "outputs/chart_ab12_1.plotly.json", "outputs/chart_ab12_1.png"),
        ChartFiles("vega-lite", "outputs/chart_ab12_3.vl.json", "outputs/chart_ab12_3.png"),
    ]


def test_only_models_that_write_code_are_told_about_chart_libraries() -> None:
    small, capable = prompts.rules(), prompts.rules(charts=True)
    assert "Plotly" not in small and "altair" not in small  # Matplotlib stays their way
    assert "prefer Plotly (plotly.express) or Altair" in capable and "altair" in capable
    assert capable.startswith(small.split("- Allowed imports")[0])
