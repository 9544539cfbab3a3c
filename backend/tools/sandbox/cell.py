"""Running one cell inside a forked run: limits, the cell itself, its results.

Part of the in-sandbox program (see `worker.py`); stdlib and data packages only.
"""

from __future__ import annotations

import linecache
import os
import resource
import traceback
from typing import Any

import charts
import out_of_core
import shown_tables
import sources
import variables

CELL = "<cell>"
# With a memory cgroup bounding what a run uses, address space is only a backstop: engines
# whose allocators reserve more than they touch (DuckDB, Arrow) get this much room beyond it.
RESERVATION_ROOM = 2 * 1024**3


def _address_space() -> int:
    """Bytes of address space this process has mapped (0 if /proc cannot tell)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def apply_limits(config: dict[str, Any], file_bytes: tuple[int, int]) -> None:
    """Limits for the run (and the zygotes it may become); hard limits can only go down.

    All are hard except the file size, `file_bytes` (soft, hard): the hard limit is
    what the disk holds above its floor, so that a later run's DuckDB may spill.

    Without a cgroup, a run may map `max_memory_mb` beyond what the zygote already
    has mapped: the interpreter, pandas, matplotlib and restored variables take
    several hundred MB of address space before the cell starts, more after a
    restart that read parquet. With one (`memory_cgroup`), the cgroup bounds the
    memory actually used and the address space only backs it up.
    """
    megabyte = 1024 * 1024
    memory = config["max_memory_mb"] * megabyte
    if config.get("memory_cgroup"):
        memory += RESERVATION_ROOM
    limits: dict[int, int | tuple[int, int]] = {
        resource.RLIMIT_AS: _address_space() + memory,
        resource.RLIMIT_CPU: int(config["max_timeout"]) + 2,
        resource.RLIMIT_FSIZE: file_bytes,
        resource.RLIMIT_NOFILE: 256,
        resource.RLIMIT_NPROC: config["max_processes"],
        resource.RLIMIT_CORE: 0,
    }
    for kind, value in limits.items():
        soft, hard = value if isinstance(value, tuple) else (value, value)
        _, current = resource.getrlimit(kind)
        if current != resource.RLIM_INFINITY:
            soft, hard = min(soft, current), min(hard, current)
        resource.setrlimit(kind, (soft, hard))


def clean_traceback(exc: BaseException) -> str:
    """The traceback the model needs: the cell's frames and the error, no sandbox internals."""
    summary = traceback.TracebackException.from_exception(exc)
    frames = [frame for frame in summary.stack if frame.filename == CELL]
    summary.stack = traceback.StackSummary.from_list(frames)
    return "".join(summary.format())


def save_figures(workspace: str, run_id: str) -> list[str]:
    import matplotlib.pyplot as plt

    saved = []
    for number in plt.get_fignums():
        relative = f"outputs/plot_{run_id}_{number}.png"
        plt.figure(number).savefig(os.path.join(workspace, relative), dpi=100)
        saved.append(relative)
    plt.close("all")
    return saved


def execute(
    code: str, namespace: dict[str, Any], state: dict[str, Any], run_id: str, workspace: str
) -> dict[str, Any]:
    """Run the cell; on success save its figures and the tables it showed, and persist the
    variables it changed."""
    linecache.cache[CELL] = (len(code), None, code.splitlines(True), CELL)
    max_memory_mb = state["config"]["max_memory_mb"]
    shown = shown_tables.Shown()
    try:
        out_of_core.configure(code, workspace, max_memory_mb, namespace)
        sources.configure(code, workspace, state["config"])
        charts.prepare(code)
        compiled = compile(shown_tables.with_display(code), CELL, "exec")
        with shown_tables.watching(shown), charts.watching() as last:
            exec(compiled, namespace)
    except BaseException as exc:
        error = clean_traceback(exc)
        if out_of_core.out_of_memory(exc):
            error += "\n" + out_of_core.memory_hint(max_memory_mb)
        return {"ok": False, "error": error}
    try:
        figures = save_figures(workspace, run_id)
        max_file_bytes = int(state["config"]["max_file_mb"] * 1024 * 1024)
        charts.save_charts(code, namespace, last[-1] if last else None, workspace, run_id,
                           max_file_bytes)  # fmt: skip
        saved = variables.persist(
            namespace,
            state["fingerprints"],
            os.path.join(workspace, "variables"),
            only=variables.names_to_check(compiled, namespace),
        )
        tables = shown_tables.save(shown, namespace, saved, workspace, run_id)
    except Exception as exc:  # e.g. the workspace is full: the run cannot be kept
        error = f"{type(exc).__name__}: the results could not be saved: {exc}"
        return {"ok": False, "error": error}
    return {"ok": True, "error": None, "figures": figures, "variables": saved, "tables": tables}
