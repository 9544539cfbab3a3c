"""The server's end of `sql()` in a run (`sources.py`): a Unix socket per sandbox.

The socket lives in a folder of its own (a short path: a socket's name is at most 108
bytes), which the sandbox sees read-only at SANDBOX_DATA. It is created with the
sandbox and removed with it. A connection may only ask while a run of its session goes
on; each asks one query, `{"source": name, "sql": text}` in a JSON line, and gets a
JSON line (`{"ok": true}`, or the refusal), then the Arrow IPC stream, then a JSON
trailer line. Who asks is the session the socket was made for: the key comes from the
server, never from the sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import shutil
import socket
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from backend.storage.sessions import SessionKey

logger = logging.getLogger(__name__)

SOCKET_NAME = "socket"
MAX_REQUEST = 1_000_000
REQUEST_SECONDS = 10.0  # to send the request line
SEND_SECONDS = 60.0  # a run that stops reading its answer for this long loses it
MAX_CONNECTIONS = 4  # of one run at once


class QueryRefused(Exception):
    """The query was not run, or the database refused it: the message says why, and
    `nearest` the catalog's names closest to one it did not know."""

    def __init__(self, message: str, nearest: list[str] | None = None) -> None:
        super().__init__(message)
        self.nearest = nearest or []


class SocketSink(io.RawIOBase):
    """Writes to the run's connection from a worker thread, blocking, within SEND_SECONDS
    a write; the `{"ok": true}` line goes first, with the first bytes."""

    def __init__(self, connection: socket.socket) -> None:
        super().__init__()
        self.connection = connection
        self.started = False

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        if not self.started:
            self.started = True
            self.connection.sendall(b'{"ok": true}\n')
        self.connection.sendall(data)
        return len(data)


# (session key, source name, SQL, sink) -> the trailer ({"id", "rows", "truncated"}).
Answerer = Callable[[SessionKey, str, str, SocketSink], Awaitable[dict[str, Any]]]


class DataChannel:
    def __init__(self, key: SessionKey, answer: Answerer) -> None:
        self.key = key
        self.answer = answer
        self.folder = Path(tempfile.mkdtemp(prefix="pda-data-"))
        self.folder.chmod(0o700)
        self._server: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._serving: set[asyncio.Task[None]] = set()
        self._run_going = False
        self._queries = 0  # numbered for the run's output: "[query q3 on sales: 12 rows]"

    def _listen(self) -> None:
        if self._server is not None:
            return
        path = self.folder / SOCKET_NAME
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        server.listen(MAX_CONNECTIONS)
        server.setblocking(False)
        self._server = server
        self._accepting = asyncio.get_running_loop().create_task(self._accept(server))

    @contextlib.asynccontextmanager
    async def during_run(self) -> AsyncIterator[None]:
        """Held around a run: its queries are answered while it goes on."""
        self._listen()
        self._run_going = True
        try:
            yield
        finally:
            self._run_going = False
            for task in list(self._serving):  # a query left running is the run's
                task.cancel()

    async def _accept(self, server: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            connection, _ = await loop.sock_accept(server)
            if not self._run_going or len(self._serving) >= MAX_CONNECTIONS:
                connection.close()
                continue
            task = loop.create_task(self._serve(connection))
            self._serving.add(task)
            task.add_done_callback(self._serving.discard)

    async def _serve(self, connection: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            request = await asyncio.wait_for(self._request(loop, connection), REQUEST_SECONDS)
            source, sql = request.get("source"), request.get("sql")
            if not isinstance(source, str) or not isinstance(sql, str):
                raise QueryRefused("sql() takes a source's name and a query, both text")
            sink = SocketSink(connection)
            connection.setblocking(True)
            connection.settimeout(SEND_SECONDS)
            try:
                trailer = await self.answer(self.key, source, sql, sink)
            except QueryRefused as refused:
                if sink.started:
                    return  # cut mid-stream: the run's reader says the stream ended early
                connection.setblocking(False)
                await _send_line(loop, connection, {
                    "ok": False, "error": str(refused), "nearest": refused.nearest
                })  # fmt: skip
                return
            self._queries += 1
            trailer = {**trailer, "id": f"q{self._queries}"}
            connection.sendall(json.dumps(trailer).encode() + b"\n")
        except QueryRefused as refused:
            with contextlib.suppress(OSError):
                connection.setblocking(False)
                await _send_line(loop, connection, {"ok": False, "error": str(refused)})
        except (OSError, TimeoutError, ValueError):
            pass  # the run went away, or sent garbage: nothing to answer
        except Exception:
            logger.exception("A run's query failed unexpectedly")
        finally:
            connection.close()

    @staticmethod
    async def _request(
        loop: asyncio.AbstractEventLoop, connection: socket.socket
    ) -> dict[str, Any]:
        data = b""
        while b"\n" not in data:
            chunk = await loop.sock_recv(connection, 65536)
            if not chunk:
                raise ValueError("no request")
            data += chunk
            if len(data) > MAX_REQUEST:
                raise QueryRefused("the query is too long")
        request = json.loads(data.split(b"\n", 1)[0])
        if not isinstance(request, dict):
            raise ValueError("not a request")
        return request

    async def close(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError, OSError):
                await self._accepting
        for task in list(self._serving):
            task.cancel()
        if self._server is not None:
            self._server.close()
            self._server = None
        shutil.rmtree(self.folder, ignore_errors=True)


async def _send_line(
    loop: asyncio.AbstractEventLoop, connection: socket.socket, message: dict[str, Any]
) -> None:
    await loop.sock_sendall(connection, json.dumps(message).encode() + b"\n")
