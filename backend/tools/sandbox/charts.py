"""Interactive charts a run made: Plotly figures and Altair (Vega-Lite) charts.

Part of the in-sandbox program (see `worker.py`); stdlib and data packages only.
A run displays a chart as a notebook would: as the cell's last expression, with
`fig.show()` / `chart.show()`, or by assigning it to a variable in the cell. Each
one is written to the workspace's outputs as its JSON spec, which the UI draws
live, and a static PNG (`chart_images.py`) for API clients, the notebook export
and the model:

    outputs/chart_<run_id>_<n>.plotly.json   or   outputs/chart_<run_id>_<n>.vl.json
    outputs/chart_<run_id>_<n>.png

A spec too large to send to a browser is left out: its PNG is then saved as an
ordinary plot (`outputs/plot_<run_id>_chart<n>.png`). Nothing here downloads anything.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

import chart_images

MAX_SPEC_BYTES = 10 * 1024 * 1024
# The builtin that the cell's last expression is handed to (`shown_tables.DISPLAY_HOOK`).
DISPLAY_HOOK = "__cell_display__"

_shown: list[Any] = []  # what the cell showed with .show(), in order


def _plotly_figure_type() -> type | None:
    module = sys.modules.get("plotly.basedatatypes")
    return getattr(module, "BaseFigure", None)


def _altair_chart_type() -> type | None:
    module = sys.modules.get("altair")
    return getattr(module, "TopLevelMixin", None)


def _record(self: Any, *args: Any, **kwargs: Any) -> None:
    """`.show()` in the sandbox: nothing to open; the chart is shown after the run."""
    _shown.append(self)


def prepare(code: str) -> None:
    """Before the cell: make `.show()` record its chart, for the libraries it may use."""
    _shown.clear()
    if "plotly" in code or "plotly" in sys.modules:
        try:
            import plotly.basedatatypes
        except ImportError:
            pass
        else:
            import plotly.io

            plotly.basedatatypes.BaseFigure.show = _record
            # pio.show(fig) too: its default (browser) renderer would wait for a request.
            plotly.io.show = _record
    if "altair" in code or "altair" in sys.modules:
        try:
            import altair
        except ImportError:
            pass
        else:
            altair.TopLevelMixin.show = _record  # type: ignore[method-assign]
            altair.TopLevelMixin.display = _record  # type: ignore[method-assign]


@contextlib.contextmanager
def watching() -> Iterator[list[Any]]:
    """While the cell runs: the value of its last expression, as the display hook gets it."""
    values: list[Any] = []
    hook = getattr(builtins, DISPLAY_HOOK, None)
    if hook is None:
        yield values
        return

    def display(value: Any) -> None:
        values.append(value)
        hook(value)

    setattr(builtins, DISPLAY_HOOK, display)
    try:
        yield values
    finally:
        if getattr(builtins, DISPLAY_HOOK, None) is display:
            setattr(builtins, DISPLAY_HOOK, hook)


def assigned_names(code: str) -> list[str]:
    """The names the cell's top level assigns, in order (not attributes or items)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    names: list[str] = []
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign | ast.AugAssign):
            targets = [node.target]
        for target in targets:
            for name in _bound(target):
                if name not in names:
                    names.append(name)
    return names


def _bound(target: ast.expr) -> list[str]:
    """The names an assignment target binds: `a`, `a, (b, *c)`; not `a.b` or `a[0]`."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    if isinstance(target, ast.Tuple | ast.List):
        return [name for element in target.elts for name in _bound(element)]
    return []


def displayed(code: str, namespace: dict[str, Any], last_value: Any) -> list[tuple[str, Any]]:
    """The charts the cell displayed, each once: (library, chart)."""
    kinds = [(t, name) for t, name in
             ((_plotly_figure_type(), "plotly"), (_altair_chart_type(), "vega-lite"))
             if t is not None]  # fmt: skip
    if not kinds:
        return []
    candidates = [*_shown, last_value, *(namespace.get(name) for name in assigned_names(code))]
    found: list[tuple[str, Any]] = []
    seen: set[int] = set()
    for value in candidates:
        if value is None or id(value) in seen:
            continue
        for kind, library in kinds:
            if isinstance(value, kind):
                seen.add(id(value))
                found.append((library, value))
                break
    return found


def _spec(library: str, chart: Any) -> str:
    if library == "plotly":
        return str(chart.to_json())
    import json

    return json.dumps(chart.to_dict(), allow_nan=False, default=str)


def save_charts(
    code: str, namespace: dict[str, Any], last_value: Any, workspace: str, run_id: str,
    max_file_bytes: int,
) -> list[str]:  # fmt: skip
    """Write each chart the cell displayed (spec and PNG); the workspace paths written.

    A chart that cannot be written is reported on stderr and skipped: the run stands.
    """
    written: list[str] = []
    charts = displayed(code, namespace, last_value)
    _shown.clear()
    limit = min(MAX_SPEC_BYTES, int(max_file_bytes * 0.9))
    for number, (library, chart) in enumerate(charts, start=1):
        stem = f"outputs/chart_{run_id}_{number}"
        try:
            spec = _spec(library, chart)
            image = chart_images.render_png(library, chart, spec)
        except Exception as exc:
            print(f"The {library} chart could not be shown: {exc}", file=sys.stderr)
            continue
        if len(spec.encode()) > limit:
            png = f"outputs/plot_{run_id}_chart{number}.png"  # too large for a live chart
            paths = [(png, image)]
        else:
            suffix = ".plotly.json" if library == "plotly" else ".vl.json"
            paths = [(stem + suffix, spec.encode()), (stem + ".png", image)]
        for relative, data in paths:
            with open(os.path.join(workspace, relative), "wb") as handle:
                handle.write(data)
            written.append(relative)
    return written
