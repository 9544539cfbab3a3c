"""Parse untrusted files in a separate, confined and resource-limited process.

Workspace files come from users and from sandboxed code. Their metadata is read
with native parsers (HDF5, Arrow, Pillow, PDF), where a crafted file can crash
the process, claim gigabytes, or take it over. So parsing happens in one
long-lived helper process with an address-space limit and a per-call time
limit: a crash, a hang or a memory blow-up costs that process (it is replaced),
never the server.

With `confine` (the sandbox's `helper_command`), the helper also runs in
bubblewrap: no network, and no file of the server's but the Python runtime and
our own code, read-only. The file it reads is opened by the server (no link
followed) and handed over as a descriptor, read-only. Its answers are unpickled
with an allowlist of classes, since a helper that a file took over must not take
over the server too. Without bubblewrap (SANDBOX=none) the same helper runs with
rlimits only.
"""

from __future__ import annotations

import builtins
import concurrent.futures
import io
import os
import pickle
import resource
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

T = TypeVar("T")
# (helper argv, code folders as (host path, sandbox path), network) -> the confined command.
Confine = Callable[..., list[str]]

MEMORY_LIMIT = 2 * 1024**3  # address space, bytes: pandas and Arrow need headroom
CPU_LIMIT = 600  # seconds over the helper's life; past it the helper is replaced
CALL_TIMEOUT = 30.0
# A helper's start, the readers' imports included, is not any call's time: on a busy
# machine it can take seconds, and no file is read yet.
BOOT_TIMEOUT = 120.0
_READY = b"R"
MAX_ANSWER = 64 * 1024**2
SOURCE_ROOT = Path(__file__).resolve().parents[2]  # holds the `backend` package
SANDBOX_CODE = "/opt/app"
_HEADER = struct.Struct("!Q")
HELPER_ENVIRONMENT = {"LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}
_SPAWNER = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="helper-spawner")
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from backend.files.isolation import serve; serve()"
)
_ANSWER_CLASSES = {
    ("backend.files.model", "FileMetadata"),
    ("backend.files.model", "UnsupportedFileType"),
    *(("datetime", name) for name in ("date", "datetime", "time", "timedelta", "timezone")),
    *(("builtins", name) for name in ("complex", "set", "frozenset", "bytearray")),
}


class IsolatedCallFailed(Exception):
    """The helper process crashed, ran out of memory or time; the message says which."""


class _Answer(pickle.Unpickler):
    """Unpickles plain data, file metadata and exceptions only: nothing that runs code."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ANSWER_CLASSES:
            return super().find_class(module, name)
        found = getattr(builtins, name, None) if module == "builtins" else None
        if isinstance(found, type) and issubclass(found, Exception):
            return found
        raise pickle.UnpicklingError(f"{module}.{name} is not an answer")


class IsolatedRunner:
    """Runs picklable module-level functions in the helper process, one call at a time."""

    def __init__(
        self,
        timeout: float = CALL_TIMEOUT,
        confine: Confine | None = None,
        packages: Sequence[str] = ("backend",),
    ) -> None:
        self.timeout = timeout
        self.confine = confine
        self.packages = tuple(packages)  # top-level packages whose functions it may run
        self._helpers: dict[bool, tuple[subprocess.Popen[bytes], socket.socket]] = {}
        self._lock = threading.Lock()

    @property
    def confined(self) -> bool:
        return self.confine is not None

    def _start(self, network: bool) -> tuple[subprocess.Popen[bytes], socket.socket]:
        ours, theirs = socket.socketpair()
        if self.confine is None:
            argv = [sys.executable, "-I", "-c", _BOOT, str(SOURCE_ROOT)]
        else:
            code = [(SOURCE_ROOT / name, f"{SANDBOX_CODE}/{name}") for name in self.packages]
            argv = self.confine(
                [sys.executable, "-I", "-c", _BOOT, SANDBOX_CODE], code, network=network
            )
        try:
            # bubblewrap's --die-with-parent kills the helper when the *thread* that started
            # it ends, and the server's worker threads end when idle: so one thread that
            # lives as long as the server starts every helper.
            process = _SPAWNER.submit(
                subprocess.Popen,
                argv,
                stdin=theirs.fileno(),  # the socket is its stdin
                stdout=subprocess.DEVNULL,
                start_new_session=True,
                env=HELPER_ENVIRONMENT,  # none of the server's (bubblewrap clears it too)
            ).result()
        finally:
            theirs.close()
        try:
            if _receive(ours, len(_READY), time.monotonic() + BOOT_TIMEOUT) != _READY:
                raise EOFError
        except (TimeoutError, EOFError, OSError):
            ours.close()
            process.kill()
            process.wait()
            raise IsolatedCallFailed("the file reader did not start") from None
        return process, ours

    def call(
        self,
        function: Callable[..., T],
        *args: Any,
        file: BinaryIO | None = None,
        network: bool = False,
    ) -> T:
        """`function(*args)` in the helper, or `function(handle, *args)` with `file` (a
        read-only handle on it); its own exceptions are raised as they are. `network`:
        a helper that may reach the network (S3), kept apart from the one that may not."""
        payload = pickle.dumps((function, args))
        with self._lock:
            if network not in self._helpers:
                self._helpers[network] = self._start(network)
            channel = self._helpers[network][1]
            deadline = time.monotonic() + self.timeout
            try:
                fds = [file.fileno()] if file is not None else []
                socket.send_fds(channel, [_HEADER.pack(len(payload))], fds)
                channel.sendall(payload)
                (length,) = _HEADER.unpack(_receive(channel, _HEADER.size, deadline))
                if length > MAX_ANSWER:
                    raise pickle.UnpicklingError("the answer is too large")
                kind, value = _Answer(io.BytesIO(_receive(channel, length, deadline))).load()
            except TimeoutError:
                self._discard(network)
                raise IsolatedCallFailed(
                    f"reading the file took longer than {self.timeout:g} s"
                ) from None
            except (OSError, EOFError):
                self._discard(network)
                raise IsolatedCallFailed("the file crashed the reader") from None
            except (pickle.UnpicklingError, ValueError, TypeError):
                self._discard(network)
                raise IsolatedCallFailed("the reader gave an answer it may not give") from None
        if kind == "ok":
            return value  # type: ignore[no-any-return]
        if kind == "memory" or isinstance(value, MemoryError):
            raise IsolatedCallFailed("reading the file needed too much memory")
        if isinstance(value, Exception):
            raise value
        raise IsolatedCallFailed("the reader gave an answer it may not give")

    def _discard(self, network: bool) -> None:
        helper = self._helpers.pop(network, None)
        if helper is None:
            return
        process, channel = helper
        channel.close()
        process.kill()  # a hung call never returns by itself
        process.wait()

    def close(self) -> None:
        with self._lock:
            for network in list(self._helpers):
                self._discard(network)


def _receive(channel: socket.socket, size: int, deadline: float | None) -> bytes:
    """Exactly `size` bytes (TimeoutError past `deadline`, EOFError if the peer is gone)."""
    data = bytearray()
    while len(data) < size:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([channel], [], [], left)[0]:
                raise TimeoutError
        chunk = channel.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise EOFError
        data += chunk
    return bytes(data)


# The helper's side ----------------------------------------------------------------


def _limit_resources() -> None:
    # Soft and hard alike: code a crafted file took over cannot raise them again.
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT, CPU_LIMIT))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def serve() -> None:
    """The helper's loop: one call in, one answer out, over the socket on stdin."""
    _limit_resources()
    channel = socket.socket(fileno=os.dup(0))
    os.close(0)
    import backend.files.metadata  # noqa: F401  # the readers, imported once

    channel.sendall(_READY)

    while True:
        try:
            header, fds, _, _ = socket.recv_fds(channel, _HEADER.size, 1)
        except OSError:
            return
        if not header:
            return  # the server closed the channel
        header += _receive(channel, _HEADER.size - len(header), None)
        (length,) = _HEADER.unpack(header)
        function, args = pickle.loads(_receive(channel, length, None))
        answer = _answer(function, args, fds)
        channel.sendall(_HEADER.pack(len(answer)) + answer)


def _answer(function: Callable[..., Any], args: tuple[Any, ...], fds: list[int]) -> bytes:
    handle = os.fdopen(fds[0], "rb") if fds else None
    try:
        result: tuple[str, Any] = ("ok", function(*((handle,) if handle else ()), *args))
    except MemoryError:
        result = ("memory", None)
    except Exception as exc:
        result = ("raised", exc)
    finally:
        if handle is not None:
            handle.close()
    try:
        return pickle.dumps(result)
    except MemoryError:
        return pickle.dumps(("memory", None))
    except Exception as exc:  # an answer that cannot be sent
        return pickle.dumps(("raised", RuntimeError(f"unsendable answer: {exc}"[:200])))
