"""The one place that builds the sandbox command line.

The sandbox sees a read-only Python runtime and system libraries, the worker's
own two files, size-capped /tmp and /dev/shm, and its session's workspace as the
only other writable place (the root and /dev are read-only). It has new user,
pid, ipc, uts, cgroup and network namespaces (no network at all, not even the
host's loopback), no capabilities, a cleared environment (no server secret is
visible), its own session (no terminal to inject into), and it cannot create
further user namespaces. It also sees, read-only, the server's record of the
files it moved into the workspace (`backend/storage/drafts.py`), so a run is judged
only on what it wrote, and the most the workspace may hold meanwhile (its owner's disk
quota, `backend/storage/run_room.py`). `helper_command` confines the file-metadata reader and
the Parquet converter alike.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from backend.storage.drafts import arrivals_folder
from backend.storage.run_room import room_folder

WORKER_DIR = Path(__file__).resolve().parent
SANDBOX_WORKSPACE = "/workspace"
SANDBOX_WORKER_DIR = "/opt/sandbox"
# The server's record of the files it moved into the workspace (`Staging.announce`).
SANDBOX_ARRIVALS = "/opt/arrivals"
# The most the workspace may hold while a run goes on (`backend/storage/run_room.py`).
SANDBOX_ROOM = "/opt/room"
# The folder of the server's socket that answers `sql()` (`data_channel.py`).
SANDBOX_DATA = "/opt/data"
# A helper's own scratch folder, its working folder (`backend/files/conversion.py`).
SANDBOX_SCRATCH = "/scratch"
TMP_SIZE_BYTES = 64 * 1024 * 1024
SHM_SIZE_BYTES = 16 * 1024 * 1024

_ENVIRONMENT = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "MPLBACKEND": "Agg",
    "MPLCONFIGDIR": "/tmp/matplotlib",
    # One thread per library: the process limit is shared, and runs are short.
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
}


def _host(path: Path) -> str:
    """A host path to bind, made absolute: bwrap resolves a relative one from its own
    working directory (a workspace), where it names nothing."""
    return os.path.abspath(path)


def python_runtime() -> list[Path]:
    """Directories the interpreter needs: the venv and the installation it points at, each
    at its real path and at the path the interpreter is started by (`worker_command` runs
    `sys.executable`, which names the venv through any symlink on the way, e.g. a checkout
    whose `.venv` links elsewhere)."""
    roots = {
        path
        for prefix in (sys.prefix, sys.base_prefix)
        for path in (Path(prefix).absolute(), Path(prefix).resolve())
    }
    return sorted(roots)


def worker_command() -> list[str]:
    """The worker, started in isolated mode: no cwd or user site on sys.path, no PYTHON* env."""
    return [sys.executable, "-I", f"{SANDBOX_WORKER_DIR}/worker.py"]


def _confined(*, hostname: str, network: bool = False) -> list[str]:
    """bwrap with its namespaces (the network's too unless `network`), the cleared
    environment, the private /tmp and the read-only system and Python runtime."""
    bwrap = shutil.which("bwrap") or "bwrap"
    command = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--as-pid-1",  # no bwrap init holding the server's pipes; the keeper is pid 1
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop", "ALL",
        "--hostname", hostname,
        "--clearenv",
    ]  # fmt: skip
    if network:
        command.insert(2, "--share-net")
    for name, value in _ENVIRONMENT.items():
        command += ["--setenv", name, value]
    command += [
        # The private /tmp goes first: a runtime or workspace that lives under the
        # host's /tmp is bound on top of it afterwards instead of being hidden by it.
        "--size", str(TMP_SIZE_BYTES), "--tmpfs", "/tmp",
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64",
        "--symlink", "usr/bin", "/bin",
        "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
        "--ro-bind-try", "/etc/localtime", "/etc/localtime",
    ]  # fmt: skip
    for root in python_runtime():
        command += ["--ro-bind", str(root), str(root)]
    return command


def helper_command(
    argv: list[str],
    code: Sequence[tuple[Path, str]],
    *,
    network: bool = False,
    scratch: Path | None = None,
) -> list[str]:
    """A helper that parses untrusted files (`backend/files/isolation.py`): the sandbox's
    namespaces and runtime, the `code` folders read-only (host path, sandbox path), and
    nothing else; the files it reads and writes arrive as open descriptors. With
    `network`, it shares the host's network (and its resolver and certificates) to read
    S3 objects. With `scratch`, that folder is its working folder, writable, at
    SANDBOX_SCRATCH (the Parquet converter's spill: `backend/files/conversion.py`)."""
    command = _confined(hostname="reader", network=network)
    for host, inside in code:
        command += ["--ro-bind", _host(host), inside]
    if network:
        for name in ("resolv.conf", "hosts", "nsswitch.conf", "ssl", "ca-certificates"):
            command += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    if scratch is not None:
        command += ["--bind", _host(scratch), SANDBOX_SCRATCH, "--chdir", SANDBOX_SCRATCH]
    command += [
        "--proc", "/proc",
        "--dev", "/dev",
        "--remount-ro", "/",
        "--",
        *argv,
    ]  # fmt: skip
    return command


def bwrap_command(workspace: Path, data_folder: Path | None = None) -> list[str]:
    """The session's sandbox; with `data_folder`, the server's data source socket in it
    at SANDBOX_DATA (read-only: a socket is reached, never replaced)."""
    command = _confined(hostname="sandbox")
    if data_folder is not None:
        command += ["--ro-bind", _host(data_folder), SANDBOX_DATA]
    command += [
        "--ro-bind", str(WORKER_DIR), SANDBOX_WORKER_DIR,
        "--ro-bind", _host(arrivals_folder(workspace)), SANDBOX_ARRIVALS,
        "--ro-bind", _host(room_folder(workspace)), SANDBOX_ROOM,
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", str(SHM_SIZE_BYTES), "--tmpfs", "/dev/shm",
        "--remount-ro", "/dev",  # device nodes still work; no files can be added there
        "--bind", _host(workspace), SANDBOX_WORKSPACE,
        "--remount-ro", "/",  # bwrap's root is an unsized tmpfs: nothing may be written there
        "--chdir", SANDBOX_WORKSPACE,
        "--",
        *worker_command(),
    ]  # fmt: skip
    return command


def program_command(
    argv: Sequence[str], *, scratch: Path, hidden: Sequence[Path], unset: Sequence[str]
) -> list[str]:
    """A program the server starts for an admin (a stdio MCP server) in bubblewrap.

    It sees the host's files read-only (its own installation wherever it lives) with each
    of `hidden` (DATA_DIR, the database) replaced by nothing, its `scratch` folder as the
    only writable place and its working folder, and none of the other programs' scratch
    folders. Its own pid, ipc, uts and user namespaces, no capabilities; the host's
    network (an MCP server may call an API). Its environment is the one it is started
    with (secrets never go on a command line, where `ps` shows them), less `unset`."""
    command = [
        shutil.which("bwrap") or "bwrap",
        "--unshare-all",
        "--share-net",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        "--cap-drop", "ALL",
        "--hostname", "mcp-server",
    ]  # fmt: skip
    for name in unset:
        command += ["--unsetenv", name]
    command += ["--ro-bind", "/", "/"]
    for path in hidden:
        if path.is_dir():
            command += ["--tmpfs", _host(path), "--remount-ro", _host(path)]
        elif path.exists():
            command += ["--ro-bind", "/dev/null", _host(path)]
    command += [
        "--tmpfs", _host(scratch.parent),  # the other programs' scratch folders
        "--bind", _host(scratch), _host(scratch),
        "--proc", "/proc",
        "--dev", "/dev",
        "--chdir", _host(scratch),
        "--",
        *argv,
    ]  # fmt: skip
    return command
