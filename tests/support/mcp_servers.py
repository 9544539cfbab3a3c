"""Real third-party MCP servers for tests: the commands that start them, and a running one.

mcp-server-time and mcp-server-sqlite (stdio) each run from a venv of its own,
.venv-mcp-servers/<name>, which `make mcp-servers` installs from
tests/mcp_servers/<name>/requirements.txt: their `mcp` pins clash with ours and with each
other. server-everything (Streamable HTTP) is the Node package in
tests/mcp_clients/node_modules, installed by `make mcp-clients`. Nothing is downloaded when
a test runs.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.live_server import free_port
from tests.support.processes import stop_group

ROOT = Path(__file__).resolve().parents[2]
SERVERS_VENV = ROOT / ".venv-mcp-servers"
EVERYTHING_ENTRY = (
    ROOT / "tests/mcp_clients/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0
POLL_SECONDS = 0.05
LOG_TAIL_BYTES = 4000
# server-everything listens on $PORT on every interface and has no host setting: this
# module, loaded before it, adds 127.0.0.1 to a listen(port, ...) call that names no host.
LOOPBACK_ONLY = (
    'data:text/javascript,import net from "node:net";'
    "const listen = net.Server.prototype.listen;"
    "net.Server.prototype.listen = function (...args) {"
    " const port = args[0], host = args[1];"
    ' if ((typeof port === "number" || /^[0-9]+$/.test(port)) && typeof host !== "string")'
    '  args.splice(1, 0, "127.0.0.1");'
    " return listen.apply(this, args);"
    "};"
)


def time_server_command() -> list[str]:
    """argv of mcp-server-time over stdio, with UTC as its local time zone (whatever the host's)."""
    return [str(SERVERS_VENV / "time/bin/mcp-server-time"), "--local-timezone", "UTC"]


def sqlite_server_command(db_path: Path) -> list[str]:
    """argv of mcp-server-sqlite over stdio on `db_path` (created if missing)."""
    return [str(SERVERS_VENV / "sqlite/bin/mcp-server-sqlite"), "--db-path", str(db_path)]


def everything_server_command(port: int) -> list[str]:
    """argv of server-everything over Streamable HTTP at http://127.0.0.1:`port`/mcp.

    It takes its port from $PORT only, hence `env`; the argv is complete on its own."""
    return [
        "env",
        f"PORT={port}",
        "node",
        f"--import={LOOPBACK_ONLY}",
        str(EVERYTHING_ENTRY),
        "streamableHttp",
    ]


def accepts_connections(port: int) -> bool:
    """Whether something listens on 127.0.0.1:`port`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def tail(log: Path) -> str:
    """The last few KB of a log file, for an error message."""
    data = log.read_bytes()[-LOG_TAIL_BYTES:]
    return data.decode(errors="replace")


@contextlib.contextmanager
def everything_server() -> Iterator[str]:
    """Run server-everything on a free loopback port; yields its Streamable HTTP URL once the
    port accepts connections, and kills its process group on exit.

    Raises with the server's log if it exits, or does not listen within START_TIMEOUT s."""
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="mcp-everything-") as tmp:
        log = Path(tmp) / "server.log"
        with log.open("ab") as out:  # the child keeps its own descriptor
            process = subprocess.Popen(
                everything_server_command(port),
                cwd=tmp,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, killed as a whole
            )
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not accepts_connections(port):
                if process.poll() is not None:
                    raise RuntimeError(
                        f"server-everything exited with {process.returncode}:\n{tail(log)}"
                    )
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"server-everything not listening on port {port} after "
                        f"{START_TIMEOUT:g} s:\n{tail(log)}"
                    )
                time.sleep(POLL_SECONDS)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            stop_group(process, STOP_TIMEOUT)
