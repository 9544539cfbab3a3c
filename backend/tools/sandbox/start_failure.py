"""What a sandbox said when it did not start: its error output, kept, and told.

bubblewrap reports a bad bind or a missing namespace on stderr and exits at once; a
worker that cannot import its modules prints a traceback there. `StderrTail` reads a
sandbox's stderr for as long as it runs (so the pipe never fills) and keeps its last
bytes. The server log gets them whole; a user gets `short_reason`, one line without
the host's paths.
"""

from __future__ import annotations

import asyncio
import contextlib
import re

TAIL_BYTES = 2048
_REASON_CHARS = 200
# A path (`/srv/data/scratch/u1-x`, `data/scratch/u1-x`, `~/x`): the host's layout is
# no user's business.
_PATH = re.compile(r"~?[\w.@+-]*(?:/[\w.@+-]*)+")


class SandboxStartError(RuntimeError):
    """The sandbox did not start. `reason` (one line, no host paths) and `str()` are safe
    to show a user; `stderr` is what the sandbox wrote (bubblewrap's or the worker's own
    words), for the server log."""

    def __init__(self, reason: str, stderr: str = "") -> None:
        super().__init__(f"The sandbox did not start: {reason}.")
        self.reason = reason
        self.stderr = stderr


def short_reason(stderr: str) -> str:
    """The last line of `stderr` with every path replaced by `…`, capped; '' if none."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return ""
    reason = _PATH.sub("…", lines[-1][:1000])
    if len(reason) > _REASON_CHARS:
        reason = reason[: _REASON_CHARS - 1] + "…"
    return reason


class StderrTail:
    """Drains a process's stderr as it runs, keeping its last `limit` bytes."""

    def __init__(self, stream: asyncio.StreamReader | None, limit: int = TAIL_BYTES) -> None:
        self.limit = limit
        self._data = bytearray()
        self._task = None if stream is None else asyncio.create_task(self._drain(stream))

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        with contextlib.suppress(ConnectionError):
            while chunk := await stream.read(4096):
                self._data += chunk
                del self._data[: -self.limit]

    async def text(self, wait: float = 1.0) -> str:
        """What the process wrote, waiting up to `wait` s for the rest (call it once the
        process has exited: its stderr then ends)."""
        if self._task is not None and not self._task.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), wait)
        return self._data.decode("utf-8", "replace").strip()

    def close(self) -> None:
        """Stop reading (the process is gone, or its output no longer matters)."""
        if self._task is not None:
            self._task.cancel()
