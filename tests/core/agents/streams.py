"""Run a compiled agent graph and collect what it streamed."""

from __future__ import annotations

from typing import Any


async def run(graph: Any, question: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The graph's final state and the step events it wrote to the custom stream."""
    events: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    async for mode, chunk in graph.astream(
        {"question": question, "history": []}, stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            events.append(chunk.payload())  # a typed event, as the wire has it
        else:
            final = chunk
    return final, events
