"""Where a client fetches what a turn's runs showed: the URLs of plots, charts and tables.

Core names an image or a chart's files by their workspace paths and a table by its id; the
routes that serve them are the API's. Each step gets its URLs here as it goes out: streamed,
in an answer, or read back from a conversation's stored steps (which, stored before the
URLs moved here, may carry them already: the same ones).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from backend.core.events import Final


def linked(payload: dict[str, Any], session_id: str) -> dict[str, Any]:
    """`payload` (a step's JSON), with the URLs of what it shows in session `session_id`
    (the client's id, never the owner-namespaced key); any other event's (a token's, on
    the hot path) is returned as it is. A stored step that lacks what a URL is made of is
    sent as it was kept."""
    made_of = _URLS.get(str(payload.get("type")))
    if made_of is None:
        return payload
    urls = {
        name: f"/api/sessions/{session_id}/{route}/{payload[key]}"
        for name, key, route in made_of
        if key in payload
    }
    return {**payload, **urls}


# A step's type: (the URL's field, the field it is made of, the route it is under).
_URLS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "plot": (("url", "path", "files"),),
    "chart": (("spec_url", "spec_path", "files"), ("png_url", "png_path", "files")),
    "table": (("url", "table_id", "tables"),),
}


def linked_metadata(metadata: Mapping[str, Any], session_id: str) -> dict[str, Any]:
    """A stored answer's metadata, its steps linked."""
    steps = metadata.get("steps")
    if not isinstance(steps, list):
        return dict(metadata)
    return {
        **metadata,
        "steps": [linked(step, session_id) if isinstance(step, dict) else step for step in steps],
    }


def tables_metadata(final: Final) -> dict[str, Any]:
    """The tables a turn's runs showed (schema, row count, first rows, the URL to page
    them), under `tables`, and its charts (each spec's and PNG's URL) under `charts`;
    neither when there are none, so an OpenAI shape stays OpenAI's."""
    shown: dict[str, Any] = {}
    session_id = final.summary.session_id
    if final.tables:
        shown["tables"] = [linked(t.payload(), session_id) for t in final.tables]
    if final.charts:
        shown["charts"] = [linked(c.payload(), session_id) for c in final.charts]
    return shown
