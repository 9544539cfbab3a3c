"""The Parquet helper's reports to the server: JSON lines on a pipe, checked at the server.

The helper (`to_parquet.py`) handles a hostile file and may be taken over by it, so what
it says is data to check, never code: each report is one line of JSON of a kind we know,
`{"kind": "progress", "percent": p}`, `{"kind": "done", "rows": n}` or
`{"kind": "failed", "error": "..."}`, at most MAX_REPORT bytes. Anything else is no
report (`read_report` raises ValueError), and nothing is ever unpickled.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import threading
from collections.abc import Iterator
from typing import Any

MAX_REPORT = 1024  # bytes in one report line; the helper's are far shorter


class Reports:
    """The helper's end: one whole line per report (each is far below PIPE_BUF)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.lock = threading.Lock()  # progress comes from a thread of its own

    def send(self, kind: str, **values: Any) -> None:
        line = json.dumps({"kind": kind, **values}).encode() + b"\n"
        with self.lock:
            os.write(self.fd, line)


def read_report(line: bytes) -> tuple[str, Any]:
    """One line of the helper's report, checked: ("progress", percent), ("done", rows) or
    ("failed", message). ValueError for anything else: it is parsed as JSON, never
    unpickled, and a kind or a field we do not know is no report."""
    if len(line) > MAX_REPORT or not line.endswith(b"\n"):
        raise ValueError("a report line too long, or cut off")

    def no_constant(name: str) -> None:
        raise ValueError(f"{name} is no report value")

    try:
        message = json.loads(line, parse_constant=no_constant)
    except RecursionError:
        raise ValueError("a report nested too deep") from None
    if not isinstance(message, dict):
        raise ValueError("a report is a JSON object")
    kind, fields = message.get("kind"), set(message) - {"kind"}
    if kind == "progress" and fields == {"percent"} and _number(message["percent"]):
        return kind, float(message["percent"])
    if kind == "done" and fields == {"rows"} and isinstance(message["rows"], int):
        return kind, message["rows"]
    if kind == "failed" and fields == {"error"} and isinstance(message["error"], str):
        return kind, message["error"][:300]
    raise ValueError("not a report the converter sends")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def report_lines(fd: int, process: subprocess.Popen[bytes]) -> Iterator[bytes]:
    """The report pipe's lines, none longer than MAX_REPORT + 1 bytes (a longer one is cut
    there, and ends them). They end at the pipe's end, or once the helper has exited and
    nothing more comes (a process it left behind may hold the pipe open)."""
    waiting = select.poll()  # not select(): the server's descriptors may pass 1024
    waiting.register(fd, select.POLLIN)
    pending = b""
    while True:
        if not waiting.poll(1000):
            if process.poll() is not None:
                return
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            if pending:
                yield pending  # cut off: no report
            return
        pending += chunk
        while (end := pending.find(b"\n")) >= 0:
            line, pending = pending[: end + 1], pending[end + 1 :]
            yield line
        if len(pending) > MAX_REPORT:
            yield pending[: MAX_REPORT + 1]
            return
