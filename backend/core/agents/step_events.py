"""What a client sees of the steps an agent's graph reports, for one turn."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from backend.core.events import Chart, Event, Execution, Plot, StepEvent
from backend.tools.python_coder.answer import output_answer, plots
from backend.tools.sandbox.chart_files import chart_files


class StepEvents:
    """What a client sees of the steps a graph reports, for one turn.

    Every tool reports its own steps: python_coder each execution attempt as it starts
    (`Code`, before the sandbox runs it) and ends (`Execution`), any other tool one
    `Execution` with its result (`ToolContext.ran`). A successful run adds a `Chart` per
    interactive chart and a `Plot` per other image at once, before any answer written
    from it.
    """

    def __init__(self) -> None:
        self.last_result: str | None = None  # the last step that worked: a stopped turn's answer
        self.last_failure: str | None = None
        self.plotted: set[str] = set()  # a plot is shown once, as soon as its run has made it
        self._settled = 0  # the graph's steps (or results) seen in its state

    def settled(self, state: Mapping[str, Any]) -> None:
        """The graph's state after a node: a step it has finished is the latest result (a
        tool's worded answer, else its text) or failure."""
        done = state.get("steps") or state.get("results") or []
        if len(done) <= self._settled:
            return
        self._settled = len(done)
        last = done[-1]
        if last["ok"]:
            self.last_result = str(last["data"].get("answer") or last["observation"])
        else:
            self.last_failure = str(last["data"].get("error") or last["observation"])

    def __call__(self, step: Event) -> Iterator[StepEvent]:
        if isinstance(step, Execution):
            yield step
            if step.ok:  # before an answer written from it
                self.last_result = output_answer(step.stdout, step.files)
                yield from self._plots(step.files, step.tool, step.index, step.run_id)
            else:
                self.last_failure = step.error or step.stdout
        elif isinstance(step, StepEvent):  # Code, Plan, StepStart, ToolCall, PassageFound, …
            yield step

    def _plots(
        self, files: list[str], tool: str | None, index: int | None, run_id: str
    ) -> Iterator[Plot | Chart]:
        """A `Chart` per interactive chart the run displayed, a `Plot` per other image."""
        charts = chart_files(files)
        for chart in charts:
            if chart.spec_path not in self.plotted:
                self.plotted.add(chart.spec_path)
                yield Chart(
                    tool=tool,
                    index=index,
                    run_id=run_id,
                    library=chart.library,
                    spec_path=chart.spec_path,
                    png_path=chart.png_path,
                )
        drawn = {chart.png_path for chart in charts}  # a chart's PNG is in its `Chart`
        for path in plots(files):
            if path not in self.plotted and path not in drawn:
                self.plotted.add(path)
                yield Plot(path=path)
