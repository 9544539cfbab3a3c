"""A real MariaDB server for tests: Debian's binaries, `mariadb-install-db` in a temporary folder.

The server listens on a free 127.0.0.1 port (and a Unix socket in its own folder), with
password authentication for a superuser made for the run (by an `--init-file`, before the
server takes connections); the passwordless root accounts that `mariadb-install-db` makes
are dropped. As root, `mariadb-install-db` and `mariadbd` run as Debian's `mysql` user
(their `--user`; `mariadbd` refuses to run as root). Each test gets a database of its own
(`MariaDbServer.new_database`) and, where it needs one, an account that may only read it
(`MariaDbServer.read_only_user`).
"""

from __future__ import annotations

import contextlib
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

import pymysql

START_TIMEOUT = 60.0
POLL_SECONDS = 0.05
USER = "agent_tests"
HOST = "127.0.0.1"
FOLDERS = ("/usr/sbin", "/usr/bin")
# Small buffers start fast (and keep the data folder at ~26 MB rather than ~114 MB: the redo
# log); durability is not what these tests measure. For `mariadb-install-db`'s bootstrap
# server too, which takes `mariadbd`'s options.
SMALL_AND_FAST = (
    "--innodb-buffer-pool-size=32M",
    "--innodb-log-file-size=8M",
    "--innodb-flush-log-at-trx-commit=0",
    "--innodb-doublewrite=0",
)


@dataclass(frozen=True)
class MariaDbServer:
    host: str
    port: int
    user: str
    password: str

    def new_database(self) -> str:
        """A fresh, empty database; returns its name."""
        name = f"test_{secrets.token_hex(6)}"
        self._run(None, f"CREATE DATABASE {_quoted(name)}")
        return name

    def read_only_user(self, database: str) -> tuple[str, str]:
        """A new account, reachable over TCP from 127.0.0.1, that may only read `database`:
        SELECT and SHOW VIEW on its tables, nothing else (no FILE, so no LOAD_FILE or
        INTO OUTFILE). Returns (user, password)."""
        user, password = f"ro_{secrets.token_hex(6)}", secrets.token_urlsafe(16)
        account = f"'{user}'@'{HOST}'"
        self._run(
            None,
            f"CREATE USER {account} IDENTIFIED BY '{password}'",
            f"GRANT SELECT, SHOW VIEW ON {_quoted(database)}.* TO {account}",
        )
        return user, password

    def execute(self, database: str, *statements: str) -> None:
        """Run `statements` in `database` as the superuser (test setup: CREATE TABLE, INSERT)."""
        self._run(database, *statements)

    def _run(self, database: str | None, *statements: str) -> None:
        connection = pymysql.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            database=database,
            autocommit=True,
            connect_timeout=2,
        )
        try:
            with connection.cursor() as cursor:
                for statement in statements:
                    cursor.execute(statement)
        finally:
            connection.close()


def _quoted(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def binaries() -> Path | None:
    """The folder of `mariadbd` and `mariadb-install-db`: PATH first, then Debian's folders.
    None when MariaDB is not installed (Debian's `mariadb-server` package)."""
    for folder in (None, *FOLDERS):
        server = shutil.which("mariadbd", path=folder)
        install = shutil.which("mariadb-install-db", path=folder)
        if server and install:
            return Path(server).resolve().parent
    return None


def _binary(bindir: Path, name: str) -> str:
    """`name` in `bindir`, else elsewhere among the usual folders: Debian puts `mariadbd`
    in /usr/sbin and `mariadb-install-db` in /usr/bin."""
    for folder in (str(bindir), None, *FOLDERS):
        found = shutil.which(name, path=folder)
        if found:
            return found
    raise FileNotFoundError(f"{name} is not in {bindir}, on PATH or in {', '.join(FOLDERS)}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _as_server_user(root: Path) -> list[str]:
    """As root: options making `mariadbd` run as `mysql`, owning `root`; otherwise none.

    `mariadbd --user` switches user itself, so the server stays the process started here:
    `runuser` would answer SIGTERM by killing it (SIGKILL) 2 seconds later, mid-shutdown,
    and exit without waiting for it."""
    if os.getuid() != 0:
        return []
    entry = pwd.getpwnam("mysql")  # created by Debian's mariadb-server package
    for path in (root, *root.rglob("*")):
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return ["--user=mysql"]


@contextlib.contextmanager
def mariadb(bindir: Path) -> Iterator[MariaDbServer]:
    """mariadb-install-db in a new temporary folder, start the server on 127.0.0.1, stop it
    (and wait) and remove the folder afterwards. Not under pytest's folders: those are
    root's, 0700."""
    root = Path(tempfile.mkdtemp(prefix="agent-mariadb-"))
    try:
        with _running(root, bindir) as server:
            yield server
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def _running(root: Path, bindir: Path) -> Iterator[MariaDbServer]:
    data, sockets, scratch, files = root / "data", root / "sockets", root / "tmp", root / "files"
    for folder in (sockets, scratch, files):
        folder.mkdir()
    server = MariaDbServer(HOST, free_port(), USER, secrets.token_urlsafe(16))
    init = root / "init.sql"
    # One statement a line: how mariadbd reads an --init-file.
    init.write_text(
        "DELETE FROM mysql.global_priv WHERE User = 'root';\n"
        "DELETE FROM mysql.proxies_priv WHERE User = 'root';\n"
        "FLUSH PRIVILEGES;\n"
        f"CREATE USER '{USER}'@'{HOST}' IDENTIFIED BY '{server.password}';\n"
        f"GRANT ALL PRIVILEGES ON *.* TO '{USER}'@'{HOST}' WITH GRANT OPTION;\n"
    )
    as_user = _as_server_user(root)
    installed = subprocess.run(
        [
            _binary(bindir, "mariadb-install-db"),
            "--no-defaults",
            *as_user,
            f"--datadir={data}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--skip-name-resolve",
            *SMALL_AND_FAST,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    if installed.returncode != 0:
        output = installed.stdout.decode(errors="replace")
        raise RuntimeError(f"mariadb-install-db exited with {installed.returncode}:\n{output}")
    log = root / "mariadb.log"
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            [
                _binary(bindir, "mariadbd"),
                "--no-defaults",
                *as_user,
                f"--datadir={data}",
                f"--socket={sockets / 'mariadb.sock'}",
                f"--pid-file={root / 'mariadb.pid'}",
                f"--tmpdir={scratch}",
                f"--init-file={init}",
                f"--bind-address={HOST}",
                f"--port={server.port}",
                "--skip-name-resolve",
                # LOAD DATA, SELECT ... INTO OUTFILE and LOAD_FILE only in an empty folder.
                f"--secure-file-priv={files}",
                *SMALL_AND_FAST,
            ],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_until_ready(server, process, log)
        init.unlink()
        yield server
    finally:
        # SIGTERM is mariadbd's normal shutdown.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _wait_until_ready(server: MariaDbServer, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"mariadbd exited with {process.returncode}:\n{log.read_text()}")
        try:
            pymysql.connect(
                host=server.host,
                port=server.port,
                user=server.user,
                password=server.password,
                connect_timeout=2,
            ).close()
            return
        except pymysql.err.OperationalError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"mariadbd did not start:\n{log.read_text()}") from None
            time.sleep(POLL_SECONDS)
