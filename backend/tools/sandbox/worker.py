"""The program that runs inside the bubblewrap sandbox; stdlib and data packages only.

Three kinds of process, all inside the sandbox's own pid namespace:

- The *keeper* (bwrap's direct child) owns the channel to the server: one JSON
  line in on stdin, one JSON line out on stdout per request. It never runs user
  code. If a run wedges its zygote, the keeper kills everything else and starts
  a fresh zygote from the persisted variables.
- The *zygote* holds the session's namespace, with numpy, pandas and matplotlib
  already imported. It never runs user code either: each run is a fork.
- The *run* executes the code. If it fails, raises, times out or crashes, the
  zygote kills its process group and carries on, so the namespace is exactly as
  before the run (rollback). If it succeeds, the run becomes the next zygote and
  its parent exits, so state carries over like a notebook.

The server never unpickles anything from here: results are JSON, and variables
are persisted in safe formats by `variables.py`.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import os
import resource
import select
import signal
import socket
import sys
import threading
import time
from typing import Any

# Our own read-only modules, beside this file (-I keeps the workspace off sys.path).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import arrivals
import cell
import out_of_core
import reaping
import room
import shown_tables
import variables
from channel import Channel
from reaping import kill_run, sweep

SANDBOX_WORKSPACE = "/workspace"  # command.py binds the workspace there
WORKSPACE = SANDBOX_WORKSPACE  # replaced by the config's "workspace" at start-up
ARRIVALS = "/opt/arrivals"  # command.py's SANDBOX_ARRIVALS; its real path without bubblewrap
ROOM = "/opt/room"  # command.py's SANDBOX_ROOM; its real path without bubblewrap
OUTPUT_CAP = 1_000_000
DISK_FLOOR_BYTES = 1024**3  # stop a run that leaves the disk with less than this free
DISK_FLOOR_INODES = 20_000
KEEPER_GRACE = 3.0  # seconds past the run timeout before the keeper steps in
SANDBOX_NICE = 10  # users' code runs below the server (CFS weight 110 against 1024)


# The run, seen from the zygote -------------------------------------------------


def run_child(
    request: dict[str, Any],
    namespace: dict[str, Any],
    state: dict[str, Any],
    pipes: dict[str, int],
) -> None:
    """In the forked run: execute, report, then either die or become the zygote."""
    os.setpgid(0, 0)
    os.dup2(pipes["out_w"], 1)
    os.dup2(pipes["err_w"], 2)
    for name in ("out_r", "err_r", "res_r", "go_w", "out_w", "err_w"):
        os.close(pipes[name])
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
    max_file_bytes = int(state["config"]["max_file_mb"] * 1024 * 1024)
    cell.apply_limits(
        state["config"],
        out_of_core.file_size_limits(request["code"], WORKSPACE, max_file_bytes, DISK_FLOOR_BYTES),
    )
    cpu_before = cpu_seconds()
    outcome = cell.execute(request["code"], namespace, state, request["id"], WORKSPACE)
    outcome["cpu"] = cpu_seconds() - cpu_before  # the user's usage; no wait4 sees this process
    sys.stdout.flush()
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)  # closes our ends of the output pipes: the zygote sees EOF
    os.dup2(devnull, 2)
    os.close(devnull)  # this run may become the zygote: one descriptor a run would add up
    outcome["pid"] = os.getpid()  # children the cell forked write here too; only ours counts
    outcome["forkable"] = out_of_core.forkable()
    os.write(pipes["res_w"], json.dumps(outcome).encode())
    os.close(pipes["res_w"])
    if not outcome["ok"] or os.read(pipes["go_r"], 2) != b"go":
        os._exit(0)
    os.close(pipes["go_r"])
    if threading.active_count() > 1 and os.fork() != 0:
        os._exit(0)  # threads the cell started do not survive a fork: the child takes over
    # Handed over: this process is now the zygote. Stop what the run left behind.
    os.dup2(state["stderr_fd"], 2)
    sys.stderr = sys.__stderr__
    sweep({os.getpid(), state["keeper_pid"]})


def cpu_seconds() -> float:
    """CPU time (user and system) of this process and the children it waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def disk_is_low() -> bool:
    try:
        disk = os.statvfs(WORKSPACE)
    except OSError:
        return False
    return disk.f_bavail * disk.f_frsize < DISK_FLOOR_BYTES or 0 < disk.f_favail < DISK_FLOOR_INODES


class DiskFull(Exception):
    """The run was filling the disk the server lives on."""


class QuotaFull(Exception):
    """The workspace holds more than the server's limit: the user's disk quota (room.py)."""


def drain(
    pipes: dict[str, int], deadline: float, space: room.Room
) -> tuple[bytes, bytes, bytes, bool, bool]:
    """Read the run's stdout, stderr and result until EOF, the deadline, a full disk or
    the user's full quota."""
    streams = {
        pipes["out_r"]: bytearray(),
        pipes["err_r"]: bytearray(),
        pipes["res_r"]: bytearray(),
    }
    open_fds = set(streams)
    truncated = timed_out = False
    result_done_at: float | None = None
    next_disk_check = 0.0
    while open_fds:
        now = time.monotonic()
        if now >= deadline:
            timed_out = True
            break
        if now >= next_disk_check:
            next_disk_check = now + 0.25
            if disk_is_low():
                raise DiskFull
        if space.over():
            raise QuotaFull
        if result_done_at is not None and now - result_done_at > 0.2:
            break  # something the run spawned still holds stdout open; stop waiting
        wait = min(deadline - now, 0.05, space.due_in())
        ready = select.select(list(open_fds), [], [], wait)[0]
        for fd in ready:
            chunk = os.read(fd, 65536)
            if not chunk:
                open_fds.discard(fd)
                if fd == pipes["res_r"]:
                    result_done_at = time.monotonic()
                continue
            buffer = streams[fd]
            room = OUTPUT_CAP - len(buffer) if fd != pipes["res_r"] else len(chunk)
            buffer += chunk[: max(room, 0)]
            truncated = truncated or room < len(chunk)
    out, err, res = (bytes(streams[pipes[k]]) for k in ("out_r", "err_r", "res_r"))
    return out, err, res, truncated, timed_out


def serve_run(
    request: dict[str, Any], chan: Channel, namespace: dict[str, Any], state: dict[str, Any]
) -> bool:
    """Run one request in a fork. Returns True if this process must leave (handed over)."""
    before = variables.snapshot_files(WORKSPACE)
    pipes: dict[str, int] = {}
    for reader, writer in (
        ("out_r", "out_w"),
        ("err_r", "err_w"),
        ("res_r", "res_w"),
        ("go_r", "go_w"),
    ):
        pipes[reader], pipes[writer] = os.pipe()
    timeout = min(
        float(request.get("timeout") or state["config"]["max_timeout"]),
        state["config"]["max_timeout"],
    )
    started = time.monotonic()
    pid = _fork_patiently()
    if pid == 0:
        run_child(request, namespace, state, pipes)
        return False  # we are the new zygote; the caller keeps serving
    for name in ("out_w", "err_w", "res_w", "go_r"):
        os.close(pipes[name])
    disk_full = quota_full = False
    space = room.Room(ROOM, WORKSPACE)
    try:
        out, err, res, truncated, timed_out = drain(pipes, started + timeout, space)
    except (DiskFull, QuotaFull) as full:
        with contextlib.suppress(ProcessLookupError):  # its writes stop now; reaped below
            os.killpg(pid, signal.SIGKILL)
        out = err = res = b""
        truncated, timed_out = False, False
        disk_full, quota_full = isinstance(full, DiskFull), isinstance(full, QuotaFull)
    # What a short run wrote between two looks: it must fit too before the run is kept.
    quota_full = quota_full or (not disk_full and space.over(now=True))
    for name in ("out_r", "err_r", "res_r"):
        os.close(pipes[name])
    outcome = None if timed_out or disk_full or quota_full else _result_of(pid, res)
    out_of_core.remove_spill(WORKSPACE)
    after = variables.snapshot_files(WORKSPACE)
    before = arrivals.with_server_moves(ARRIVALS, before, after)
    too_many_files = len(after) > variables.MAX_WORKSPACE_FILES
    max_file_mb = state["config"]["max_file_mb"]
    oversized = variables.oversized_files(before, after, int(max_file_mb * 1024 * 1024))
    ok = bool(outcome and outcome["ok"]) and not too_many_files and not oversized
    response: dict[str, Any] = {
        "id": request["id"],
        "ok": ok,
        "stdout": sandbox_view(out.decode(errors="replace")),
        "stderr": sandbox_view(err.decode(errors="replace")),
        "truncated": truncated,
        "duration": time.monotonic() - started,
    }
    # A run stopped before it could report (timed out, killed, disk full) counts its wall time.
    response["cpu"] = outcome.get("cpu", 0.0) if outcome is not None else response["duration"]
    if ok:
        assert outcome is not None
        response.update(figures=outcome["figures"], variables=outcome["variables"])
        response["tables"] = outcome.get("tables", [])
        hidden = shown_tables.TABLES_FOLDER + "/"  # the tables' own files, paged by the server
        files = variables.changed_files(before, after)
        response["files"] = [name for name in files if not name.startswith(hidden)]
        if not outcome.get("forkable", True):
            os.close(pipes["go_w"])
            kill_run(pid, state["keeper_pid"])
            reload_variables(namespace, state)
            chan.send(response)
            return False
        chan.send(response)
        # Whatever the cell forked could read the handover token: stop it first.
        sweep({os.getpid(), state["keeper_pid"], pid})
        os.write(pipes["go_w"], b"go")
        os.close(pipes["go_w"])
        return True
    os.close(pipes["go_w"])
    _, status = kill_run(pid, state["keeper_pid"])
    out_of_core.remove_spill(WORKSPACE)  # what the run spilled after we looked
    if quota_full:
        created = sorted(set(after) - set(before))
        variables.remove_files(WORKSPACE, created)
        after = variables.snapshot_files(WORKSPACE)
        response["error"] = (
            "OSError: the run was stopped because your sessions reached your disk quota; "
            f"the {len(created)} file(s) it had created were deleted. Delete files you no "
            "longer need (or write smaller results), or ask an admin to raise your quota."
        )
    elif disk_full:
        response["error"] = (
            "OSError: the run was stopped because the disk was nearly full; "
            "delete files from the workspace."
        )
    elif oversized:
        variables.remove_files(WORKSPACE, oversized)
        response["error"] = (
            f"OSError: the run wrote {', '.join(oversized)}, over the {max_file_mb:g} MB file "
            "size limit, so it was deleted and the run undone. Write smaller results "
            "(aggregate first), or query large data with DuckDB without writing it out."
        )
    elif too_many_files:
        response["error"] = (
            f"OSError: the workspace holds more than {variables.MAX_WORKSPACE_FILES} files, "
            "the limit; the run was undone. Delete files (for example with shutil.rmtree) "
            "to continue."
        )
    elif timed_out:
        response["error"] = f"TimeoutError: the code ran longer than {timeout:g} s and was stopped."
    elif outcome is not None:
        response["error"] = outcome["error"]
    else:
        response["error"] = _describe_death(status, state["config"]["max_memory_mb"])
    response["error"] = sandbox_view(response["error"])
    response["files"] = [f for f in variables.changed_files(before, after) if f not in oversized]
    chan.send(response)
    return False


def sandbox_view(text: str) -> str:
    """`text` with the workspace shown as the sandbox shows it: without bubblewrap
    (SANDBOX=none) it has its real path, a server path no response may carry."""
    if WORKSPACE == SANDBOX_WORKSPACE:
        return text
    return text.replace(WORKSPACE, SANDBOX_WORKSPACE)


def reload_variables(namespace: dict[str, Any], state: dict[str, Any]) -> None:
    """The zygote's namespace as the last run saved it, for a run that could not take over."""
    namespace.clear()
    namespace.update({"__name__": "__main__", "__builtins__": builtins})
    with contextlib.suppress(Exception):  # as at start: a tampered catalog restores nothing
        variables.restore(namespace, os.path.join(WORKSPACE, "variables"))
    state["fingerprints"] = variables.fingerprints(namespace)


def _result_of(pid: int, data: bytes) -> dict[str, Any] | None:
    """The run's own result among whatever was written to the result pipe."""
    decoder, text, position = json.JSONDecoder(), data.decode(errors="replace"), 0
    while position < len(text):
        try:
            value, position = decoder.raw_decode(text, position)
        except ValueError:
            return None
        if isinstance(value, dict) and value.get("pid") == pid:
            return value
    return None


def _describe_death(status: int, max_memory_mb: float) -> str:
    if os.WIFSIGNALED(status):
        name = signal.Signals(os.WTERMSIG(status)).name
        if name == "SIGKILL":  # most often the memory cgroup's OOM killer
            advice: str = out_of_core.memory_hint(max_memory_mb)
            return (
                "MemoryError: the process was killed (SIGKILL), most likely for exceeding "
                f"the memory limit. Variables are as before this run.\n{advice}"
            )
        hint = {
            "SIGSEGV": "the interpreter crashed (segmentation fault)",
            "SIGXCPU": "the CPU time limit was exceeded",
            "SIGXFSZ": "a file grew past the file size limit",
        }.get(name, "the process died")
        return f"RuntimeError: {hint} ({name}). Variables are as before this run."
    return "RuntimeError: the code exited without a result. Variables are as before this run."


# The zygote and the keeper ------------------------------------------------------


def zygote(chan: Channel, config: dict[str, Any], keeper_pid: int) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the keeper ignores it; we must reap runs
    os.environ["MPLBACKEND"] = "Agg"
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot
    import numpy  # noqa: F401
    import pandas  # noqa: F401

    for folder in ("uploads", "outputs", "variables"):
        os.makedirs(os.path.join(WORKSPACE, folder), exist_ok=True)
    out_of_core.remove_spill(WORKSPACE)  # left by a sandbox that was killed
    namespace: dict[str, Any] = {"__name__": "__main__", "__builtins__": builtins}
    try:
        restored, problems = variables.restore(namespace, os.path.join(WORKSPACE, "variables"))
    except Exception as exc:  # a tampered catalog must never keep the session from starting
        restored, problems = [], [f"catalog: {type(exc).__name__}: {exc}"[:300]]
    state = {
        "config": config,
        "keeper_pid": keeper_pid,
        "stderr_fd": os.dup(2),
        "fingerprints": variables.fingerprints(namespace),
    }
    chan.send({"ready": True, "restored": restored, "problems": problems})
    while True:
        request = chan.recv()
        if request is None:
            os._exit(0)
        if serve_run(request, chan, namespace, state):
            os._exit(0)  # the run took over as zygote


def _fork_patiently() -> int:
    """fork(), waiting out a process limit that killed processes still hold.

    After a fork bomb, thousands of killed processes can take seconds to be reaped
    on a loaded machine; giving up sooner costs the session its interpreter.
    """
    for _ in range(400):  # 20 s
        try:
            return os.fork()
        except BlockingIOError:
            time.sleep(0.05)
    return os.fork()


def spawn_zygote(config: dict[str, Any], server_fds: tuple[int, ...]) -> Channel:
    keeper_side, zygote_side = socket.socketpair()
    keeper_pid = os.getpid()
    if _fork_patiently() == 0:
        keeper_side.close()
        for fd in server_fds:  # runs must never reach the server's pipes
            os.close(fd)
        try:
            zygote(Channel(zygote_side), config, keeper_pid)
        finally:
            os._exit(1)
    zygote_side.close()
    return Channel(keeper_side)


def _answers(response: Any, request: dict[str, Any]) -> bool:
    return (
        isinstance(response, dict)
        and response.get("id") == request["id"]
        and isinstance(response.get("ok"), bool)
    )


def _undumpable() -> None:
    """Keep other processes (runs) out of our /proc/<pid>/fd, where the server's pipes are."""
    import ctypes

    pr_set_dumpable = 4
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_dumpable, 0, 0, 0, 0)


def keeper() -> None:
    _undumpable()
    # Users' code is the host's lowest priority: the server that answers everyone comes
    # first, and every user's sandboxes share what is left alike. The code cannot raise
    # it back (no CAP_SYS_NICE in here).
    with contextlib.suppress(OSError):
        os.nice(SANDBOX_NICE)
    requests = os.fdopen(os.dup(0), "r")
    responses = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    if devnull > 1:
        os.close(devnull)
    config = json.loads(requests.readline())
    config["max_timeout"] = float(config["max_timeout"])
    global WORKSPACE, ARRIVALS, ROOM
    WORKSPACE = config["workspace"]
    if not config["isolated"]:  # DATA_DIR/scratch/<key> -> DATA_DIR/staging/<key>/arrivals
        data_dir, key = os.path.dirname(os.path.dirname(WORKSPACE)), os.path.basename(WORKSPACE)
        ARRIVALS = os.path.join(data_dir, "staging", key, "arrivals")
        ROOM = os.path.join(data_dir, "staging", key, "room")
    reaping.isolated = bool(config["isolated"])
    os.chdir(WORKSPACE)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # zygotes come and go; never keep zombies

    server_fds = (requests.fileno(), responses.fileno())

    def start() -> tuple[Channel, dict[str, Any]]:
        chan = spawn_zygote(config, server_fds)
        hello = chan.recv(time.monotonic() + 120) or {"ready": False}
        return chan, hello

    chan, hello = start()
    responses.write(json.dumps(hello) + "\n")
    responses.flush()
    for line in requests:
        request = json.loads(line)
        chan.send(request)
        deadline = time.monotonic() + config["max_timeout"] + KEEPER_GRACE
        response = chan.recv(deadline)
        while response is not None and not _answers(response, request):
            response = chan.recv(deadline)  # a run may write into the channel: skip forgeries
        if response is None:
            sweep({os.getpid()})
            chan.sock.close()
            chan, hello = start()
            response = {
                "id": request["id"],
                "ok": False,
                "stdout": "",
                "stderr": "",
                "truncated": False,
                "files": [],
                "error": "RuntimeError: the run took down its interpreter; the session was "
                "restarted with the variables of the last successful run "
                f"({len(hello.get('restored', []))} restored).",
            }
        responses.write(json.dumps(response) + "\n")
        responses.flush()


if __name__ == "__main__":
    keeper()
