"""The sandbox's internal channel between keeper and zygote: JSON lines over a socket.

Part of the in-sandbox program (see `worker.py`); stdlib only.
"""

from __future__ import annotations

import json
import select
import socket
import time
from typing import Any


class Channel:
    """Newline-delimited JSON over a socket, with deadlines."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps(message).encode() + b"\n")

    def recv(self, deadline: float | None = None) -> dict[str, Any] | None:
        while b"\n" not in self.buffer:
            wait = None if deadline is None else max(deadline - time.monotonic(), 0)
            if not select.select([self.sock], [], [], wait)[0]:
                return None
            try:
                chunk = self.sock.recv(65536)
            except ConnectionError:
                return None
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        try:
            message: dict[str, Any] = json.loads(line)
        except (ValueError, RecursionError):
            return {"garbage": True}  # not from our code; the caller skips it
        return message
