"""A file that crashes, hangs or bloats its reader costs the helper process, not the server;
one that takes its reader over finds itself in bubblewrap, with only that file (issue 24)."""

from __future__ import annotations

import asyncio
import io
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from backend.files.catalog import WorkspaceCatalog
from backend.files.isolation import IsolatedCallFailed, IsolatedRunner
from backend.storage.workspaces import Workspaces
from backend.tools.sandbox.availability import bwrap_problem
from backend.tools.sandbox.command import helper_command


def crash() -> None:
    os.abort()


def hang() -> None:
    time.sleep(60)


def bloat() -> bytes:
    return bytes(8 * 1024**3)


def pid() -> int:
    return os.getpid()


def refuse() -> None:
    raise ValueError("not a table")


@pytest.fixture(scope="module")
def runner() -> Iterator[IsolatedRunner]:
    running = IsolatedRunner(timeout=20)
    yield running
    running.close()


def test_calls_run_in_one_reused_helper_process(runner: IsolatedRunner) -> None:
    first = runner.call(pid)
    assert first != os.getpid() and runner.call(pid) == first
    with pytest.raises(ValueError, match="not a table"):
        runner.call(refuse)  # the function's own errors arrive as they are
    assert runner.call(pid) == first


def test_an_unconfined_reader_gets_none_of_the_servers_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With SANDBOX=none there is no bubblewrap to clear it: the server must."""
    monkeypatch.setenv("SECRET_KEY", "the-servers-own-secret")
    running = IsolatedRunner(timeout=20)
    try:
        helper = running.call(pid)
        environment = Path(f"/proc/{helper}/environ").read_bytes()
    finally:
        running.close()
    assert b"the-servers-own-secret" not in environment
    assert b"PATH=" in environment


def test_a_crash_replaces_the_helper(runner: IsolatedRunner) -> None:
    before = runner.call(pid)
    with pytest.raises(IsolatedCallFailed, match="crashed"):
        runner.call(crash)
    assert runner.call(pid) != before


def test_memory_is_capped(runner: IsolatedRunner) -> None:
    with pytest.raises(IsolatedCallFailed, match="too much memory"):
        runner.call(bloat)
    assert runner.call(pid) > 0


def test_a_hang_is_cut_off_and_the_helper_replaced() -> None:
    runner = IsolatedRunner(timeout=3)
    try:
        before = runner.call(pid)
        started = time.monotonic()
        with pytest.raises(IsolatedCallFailed, match="longer than 3 s"):
            runner.call(hang)
        assert time.monotonic() - started < 10
        assert runner.call(pid) != before
    finally:
        runner.close()


def read_secret(path: str) -> str:
    return Path(path).read_text()


def connect(port: int) -> None:
    socket.create_connection(("127.0.0.1", port), timeout=5).close()


def head(handle: BinaryIO, count: int) -> bytes:
    return handle.read(count)


def overwrite(handle: BinaryIO) -> None:
    os.write(handle.fileno(), b"pwned")


def smuggle() -> object:
    return Path("not an answer")  # unpickling a class off the allowlist could run code


@pytest.fixture(scope="module")
def confined() -> Iterator[IsolatedRunner]:
    if bwrap_problem() is not None:
        pytest.skip(f"no bubblewrap here: {bwrap_problem()}")
    running = IsolatedRunner(timeout=20, confine=helper_command, packages=("backend", "tests"))
    yield running
    running.close()


def test_a_confined_reader_cannot_read_the_secret_key_nor_reach_the_network(
    confined: IsolatedRunner, tmp_path: Path
) -> None:
    secret = tmp_path / "data" / "secret_key"
    secret.parent.mkdir()
    secret.write_text("the server's signing key")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    unconfined = IsolatedRunner(timeout=20)
    try:  # the same calls succeed without bubblewrap: the attempts themselves work
        assert unconfined.call(read_secret, str(secret)) == "the server's signing key"
        unconfined.call(connect, port)
    finally:
        unconfined.close()
    with pytest.raises(OSError):
        confined.call(read_secret, str(secret))
    with pytest.raises(OSError):
        confined.call(connect, port)
    listener.close()


def test_a_confined_reader_gets_its_file_read_only_and_may_answer_only_plain_data(
    confined: IsolatedRunner, tmp_path: Path
) -> None:
    data = tmp_path / "sales.csv"
    data.write_bytes(b"region,price\nnorth,10\n")
    with data.open("rb") as handle:
        assert confined.call(head, 6, file=handle) == b"region"
    with data.open("rb") as handle, pytest.raises(OSError):
        confined.call(overwrite, file=handle)
    assert data.read_bytes() == b"region,price\nnorth,10\n"
    with pytest.raises(IsolatedCallFailed, match="may not give"):
        confined.call(smuggle)
    with data.open("rb") as handle:
        assert confined.call(head, 6, file=handle) == b"region"  # a fresh helper


def test_metadata_is_still_extracted_by_the_confined_reader(
    confined: IsolatedRunner, tmp_path: Path
) -> None:
    workspaces = Workspaces(tmp_path / "data")
    workspaces.ensure("u1-s")
    workspaces.write_upload("u1-s", "sales.csv", io.BytesIO(b"region,price\nnorth,10\n"), 10**6)
    info = asyncio.run(WorkspaceCatalog(workspaces, confined).info("u1-s", "sales.csv"))
    assert info.error is None and info.kind == "tabular", info
    assert [column["name"] for column in info.details["columns"]] == ["region", "price"]


def test_a_confined_reader_outlives_the_thread_that_first_called_it() -> None:
    """The server's worker threads end when idle; bubblewrap's --die-with-parent once killed
    the helper with the thread that started it, and the next file "crashed the reader"."""
    if bwrap_problem() is not None:
        pytest.skip(f"no bubblewrap here: {bwrap_problem()}")
    runner = IsolatedRunner(timeout=20, confine=helper_command, packages=("backend", "tests"))
    try:
        first: list[int] = []
        thread = threading.Thread(target=lambda: first.append(runner.call(pid)))
        thread.start()
        thread.join()  # the thread that started the helper is gone
        assert runner.call(pid) == first[0]  # the same helper, still alive
    finally:
        runner.close()
