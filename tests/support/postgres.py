"""A real PostgreSQL server for tests: Debian's binaries, `initdb` in a temporary folder.

The server listens on a free 127.0.0.1 port (and a Unix socket in its own folder), with
password authentication for a superuser made for the run. As root, `initdb` and
`postgres` run as Debian's `postgres` user (PostgreSQL refuses to run as root). Each
test gets a database of its own (`PostgresServer.new_database`).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

START_TIMEOUT = 60.0
POLL_SECONDS = 0.05
USER = "agent_tests"


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    user: str
    password: str

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}:{self.password}@{self.host}:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; returns its URL."""
        name = f"test_{secrets.token_hex(6)}"
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f"CREATE DATABASE {name}")
        return self.url(name)


def binaries() -> Path | None:
    """The folder of `initdb` and `postgres`: PATH first, then Debian's versioned folders."""
    for found in (shutil.which("initdb"), shutil.which("postgres")):
        if found:
            return Path(found).resolve().parent
    folders = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version)
    return Path(folders[-1]) if folders else None


def _version(folder: str) -> int:
    number = Path(folder).parent.name
    return int(number) if number.isdigit() else 0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_server_user(root: Path) -> list[str]:
    """As root: a prefix running commands as `postgres`, owning `root`; otherwise nothing."""
    if os.getuid() != 0:
        return []
    entry = pwd.getpwnam("postgres")  # created by Debian's postgresql package
    for path in (root, *root.rglob("*")):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return ["runuser", "-u", "postgres", "--"]


@contextlib.contextmanager
def postgres(bindir: Path) -> Iterator[PostgresServer]:
    """initdb in a new temporary folder, start the server on 127.0.0.1, stop it (and wait)
    and remove the folder afterwards. Not under pytest's folders: those are root's, 0700."""
    root = Path(tempfile.mkdtemp(prefix="agent-postgres-"))
    try:
        with _running(root, bindir) as server:
            yield server
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def _running(root: Path, bindir: Path) -> Iterator[PostgresServer]:
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir(parents=True)
    password = secrets.token_urlsafe(16)
    (root / "pwfile").write_text(password)
    prefix = _as_server_user(root)
    subprocess.run(
        [
            *prefix,
            str(bindir / "initdb"),
            f"--pgdata={data}",
            f"--username={USER}",
            f"--pwfile={root / 'pwfile'}",
            "--auth=scram-sha-256",
            "--encoding=UTF8",
            "--no-instructions",
        ],
        check=True,
        capture_output=True,
    )
    (root / "pwfile").unlink()
    server = PostgresServer("127.0.0.1", free_port(), USER, password)
    log = root / "postgres.log"
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            [
                *prefix,
                str(bindir / "postgres"),
                "-D",
                str(data),
                "-h",
                "127.0.0.1",
                "-p",
                str(server.port),
                "-k",
                str(sockets),
                # Durability is not what these tests measure; a test server need not fsync.
                "-c",
                "fsync=off",
                "-c",
                "full_page_writes=off",
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_until_ready(server, process, log)
        yield server
    finally:
        # SIGINT is PostgreSQL's "fast" shutdown: it does not wait for clients to leave.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _wait_until_ready(server: PostgresServer, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"postgres exited with {process.returncode}:\n{log.read_text()}")
        try:
            psycopg.connect(server.url(), connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not start:\n{log.read_text()}") from None
            time.sleep(POLL_SECONDS)
