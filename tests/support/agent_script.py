"""Scripted agent turns and small clients shared by the API and UI tests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from tests.support.live_server import LiveServer

SALES = b"region,price\nnorth,10\nsouth,30\n"
CODE = (
    "import matplotlib.pyplot as plt\nplt.plot(df1['price'])\n"
    "print('mean price:', df1['price'].mean())\n"
)
SLOW_STARTED = "outputs/slow_started.txt"  # written as the slow code starts: a test waits for it
# Three statements: trivial code, which the coder runs without asking for an LLM review.
SLOW_CODE = (
    f"import time\nopen({SLOW_STARTED!r}, 'w').close() or time.sleep(20)\nprint('too late')\n"
)


def react_turn(tag: str, code: str = CODE, answer: str = "The mean price is 20.0.") -> list[
    dict[str, Any]
]:  # fmt: skip
    """A ReAct turn: python_coder runs `code` (by default with a plot), and its answer,
    written once, is the turn's (ReAct makes no call after it)."""
    action = f"Thought: compute it\nAction: coder\nAction Input: {tag} mean price"
    return [
        {"when": ["[stage: react]", tag], "content": action},
        {"when": ["[stage: generate]", tag], "content": f"```python\n{code}```"},
        {"when": ["[stage: answer]", tag], "content": answer},
    ]


def slow_turn(tag: str) -> list[dict[str, Any]]:
    """A ReAct turn whose code sleeps for 20 s (for stopping and disconnecting)."""
    return [
        {"when": ["[stage: react]", tag], "content": f"Action: coder\nAction Input: {tag} wait"},
        {"when": ["[stage: generate]", tag], "content": f"```python\n{SLOW_CODE}```"},
    ]


def upload(server: LiveServer, session: str, name: str = "sales.csv", data: bytes = SALES) -> None:
    with server.client() as http:
        response = http.post(
            "/api/upload", data={"session_id": session}, files={"file": (name, data)}
        )
    assert response.status_code == 201, response.text


def sse_events(lines: Iterable[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, JSON data) for each server-sent event; the data's `type` is the name."""
    name = ""
    for line in lines:
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data = json.loads(line.removeprefix("data: "))
            assert data["type"] == name
            yield name, data
