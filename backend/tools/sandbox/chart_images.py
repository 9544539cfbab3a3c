"""A chart's static PNG, drawn with Matplotlib inside the sandbox.

Part of the in-sandbox program (see `worker.py`); stdlib and data packages only.
The exact renderers (Plotly's kaleido drives Chromium; vl-convert embeds V8) cannot
start under the sandbox's address-space limit: V8 reserves its whole pointer cage
up front, and both die at launch. So the PNG is an honest Matplotlib drawing of the
common cases: Plotly's scatter/line, bar, histogram and pie traces, and a Vega-Lite
view (or layer) of bar, line, point, area, tick or arc marks with x/y/color/theta
encodings, binning and the usual aggregates over inline data. What it cannot draw
is named on the image, which points to the interactive chart.
"""

from __future__ import annotations

import io
import json
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure

_AGGREGATES = {"sum": "sum", "mean": "mean", "average": "mean", "median": "median",
               "min": "min", "max": "max", "count": "count", "distinct": "nunique"}  # fmt: skip
_COMPOSED = ("hconcat", "vconcat", "concat", "facet", "repeat")


def render_png(library: str, chart: Any, spec: str) -> bytes:
    figure = Figure(figsize=(6.4, 4.4), dpi=100, layout="tight")
    axes = figure.subplots()
    missing = _plotly(axes, chart) if library == "plotly" else _vega_lite(axes, json.loads(spec))
    if missing:
        note = "Not drawn here (see the interactive chart): " + ", ".join(sorted(set(missing)))
        figure.text(0.01, 0.01, note, fontsize=7, color="#666666")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _text(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("text")
    return str(value) if value else ""


def _list(values: Any) -> list[Any]:
    return [] if values is None else list(values)


# Plotly ---------------------------------------------------------------------------


def _plotly(axes: Axes, figure: Any) -> list[str]:
    missing: list[str] = []
    named = 0
    layout = figure.layout
    alone = all(trace.type == "pie" for trace in figure.data)
    for trace in figure.data:
        kind, name = trace.type, getattr(trace, "name", None) or None
        named += bool(name)
        if kind == "pie" and not alone:
            missing.append("pie traces beside other traces")
            continue
        if kind in ("scatter", "scattergl"):
            y = _list(trace.y)
            x = _list(trace.x) or list(range(len(y)))
            mode = trace.mode or ("lines+markers" if len(y) < 20 else "lines")
            if "lines" in mode:
                axes.plot(x, y, marker="o" if "markers" in mode else None, markersize=3, label=name)
            else:
                axes.scatter(x, y, s=12, label=name)
        elif kind == "bar":
            x, y = _list(trace.x), _list(trace.y)
            if trace.orientation == "h":
                axes.barh(y or list(range(len(x))), x, alpha=0.85, label=name)
            else:
                axes.bar(x or list(range(len(y))), y, alpha=0.85, label=name)
        elif kind == "histogram":
            horizontal = trace.x is None and trace.y is not None
            values = _list(trace.y if horizontal else trace.x)
            bins = (trace.nbinsy if horizontal else trace.nbinsx) or "auto"
            axes.hist(values, bins=bins, alpha=0.75, label=name,
                      orientation="horizontal" if horizontal else "vertical")  # fmt: skip
        elif kind == "pie":
            values = _list(trace.values)
            labels = _list(trace.labels) or None
            axes.pie(values or [1] * len(labels or []), labels=labels, autopct="%1.0f%%")
            axes.set_aspect("equal")
        else:
            missing.append(f"{kind} traces")
    axes.set_title(_text(layout.title.text))
    axes.set_xlabel(_text(layout.xaxis.title.text))
    axes.set_ylabel(_text(layout.yaxis.title.text))
    if named > 1 and layout.showlegend is not False:
        axes.legend(fontsize=8)
    return missing


# Vega-Lite ------------------------------------------------------------------------


def _vega_lite(axes: Axes, spec: dict[str, Any]) -> list[str]:
    axes.set_title(_text(spec.get("title")))
    if any(key in spec for key in _COMPOSED):
        axes.set_axis_off()
        return ["composed views (concat, facet, repeat)"]
    data = spec.get("data")
    encoding = spec.get("encoding", {})
    views = spec.get("layer") or [spec]
    missing: list[str] = []
    for view in views:
        rows = _rows(view.get("data") or data, spec.get("datasets", {}))
        merged = {**encoding, **view.get("encoding", {})}
        if rows is None:
            missing.append("data loaded from a URL")
        elif "transform" in view or "layer" in view:
            missing.append("transforms" if "transform" in view else "nested layers")
        else:
            missing += _view(axes, _mark(view), merged, rows)
    return missing


def _rows(data: Any, datasets: dict[str, Any]) -> list[dict[str, Any]] | None:
    if not isinstance(data, dict):
        return None
    if "values" in data:
        return list(data["values"])
    if "name" in data and data["name"] in datasets:
        return list(datasets[data["name"]])
    return None


def _mark(view: dict[str, Any]) -> str:
    mark = view.get("mark", "point")
    return str(mark.get("type", "point") if isinstance(mark, dict) else mark)


def _view(axes: Axes, mark: str, encoding: dict[str, Any], rows: list[dict[str, Any]]) -> list[str]:
    import pandas as pd

    frame = pd.DataFrame(rows)
    color = encoding.get("color", {}).get("field")
    if mark == "arc":
        theta = encoding.get("theta", {})
        values = _aggregated(frame, [color] if color else [], theta)
        axes.pie(values.iloc[:, -1], labels=values[color] if color else None, autopct="%1.0f%%")
        axes.set_aspect("equal")
        return []
    x, y = encoding.get("x", {}), encoding.get("y", {})
    if "field" not in x and "field" not in y:
        return [f"{mark} marks without x/y fields"]
    if x.get("bin") or y.get("bin"):
        binned = x if x.get("bin") else y
        axes.hist(frame[binned["field"]].dropna(), bins="auto", alpha=0.8,
                  orientation="vertical" if binned is x else "horizontal")  # fmt: skip
        axes.set_xlabel(x.get("title") or x.get("field") or "count")
        axes.set_ylabel(y.get("title") or y.get("field") or "count")
        return []
    horizontal = y.get("type") in ("nominal", "ordinal") and x.get("type") == "quantitative"
    key, value = (y, x) if horizontal else (x, y)
    groups = list(dict.fromkeys(name for name in (key.get("field"), color) if name))
    table = _aggregated(frame, groups, value) if value.get("aggregate") else frame
    value_column = table.columns[-1] if value.get("aggregate") else value.get("field")
    series = table.groupby(color, sort=False) if color else [(None, table)]
    for label, part in series:
        keys, values = part[key["field"]], part[value_column]
        name = None if label is None else str(label)
        if mark == "bar":
            (axes.barh if horizontal else axes.bar)(keys.astype(str) if horizontal else keys,
                                                    values, alpha=0.85, label=name)  # fmt: skip
        elif mark in ("line", "trail"):
            axes.plot(keys, values, label=name)
        elif mark == "area":
            axes.fill_between(keys, values, alpha=0.5, label=name)
        elif mark in ("point", "circle", "square", "tick"):
            axes.scatter(
                values if horizontal else keys, keys if horizontal else values, s=14, label=name
            )
        else:
            return [f"{mark} marks"]
    axes.set_xlabel(str(x.get("title") or x.get("field") or ""))
    axes.set_ylabel(str(y.get("title") or y.get("field") or ""))
    if color:
        axes.legend(fontsize=8, title=color)
    return []


def _aggregated(frame: Any, groups: list[str], channel: dict[str, Any]) -> Any:
    """`frame` grouped by `groups`, with the channel's aggregate as the last column."""
    how = _AGGREGATES.get(str(channel.get("aggregate", "sum")), "sum")
    field = channel.get("field")
    if how == "count" or not field:
        counted = frame.groupby(groups, sort=False).size() if groups else frame.shape[0]
        return counted.reset_index(name="count") if groups else _one(counted)
    if not groups:
        return _one(frame[field].agg(how))
    return frame.groupby(groups, sort=False)[field].agg(how).reset_index()


def _one(value: Any) -> Any:
    import pandas as pd

    return pd.DataFrame({"value": [value]})
