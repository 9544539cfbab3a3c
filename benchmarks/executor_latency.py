"""How fast is a run in the warm sandbox, against starting Python for each run?

Prints p50 and p95 for: a warm `print(1)`; the first run in a new session (cold:
bwrap, interpreter, pandas and matplotlib imports); a pandas group-by on 100k rows;
and a run right after a rollback. The baseline, measured in the same run, is what
the seeds did: a fresh `python -c "import pandas; print(1)"` subprocess per run.

    .venv/bin/python -m benchmarks.executor_latency [--runs 200] [--cold 10] [--smoke]

`--smoke`: a few runs of each, to check that it runs (`make test` does).

Goal: warm p50 <= 20 ms inside the full sandbox, and >= 30x faster than the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from backend.storage.sessions import session_key
from backend.storage.workspaces import Workspaces
from backend.tools.sandbox.availability import resolve_sandbox
from backend.tools.sandbox.executor import ExecutionResult, ExecutorLimits, SandboxedExecutor

LIMITS = ExecutorLimits(timeout=30, max_memory_mb=1024, max_file_mb=50)
GROUP_BY = "summary = frame.groupby('key')['value'].agg(['mean', 'sum'])\nprint(len(summary))"
SETUP = (
    "import numpy as np, pandas as pd\n"
    "rng = np.random.default_rng(0)\n"
    "frame = pd.DataFrame({'key': rng.integers(0, 100, 100_000), 'value': rng.random(100_000)})"
)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


async def timed(action: Callable[[], Awaitable[object]], times: int) -> list[float]:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        await action()
        samples.append(time.perf_counter() - started)
    return samples


async def run(executor: SandboxedExecutor, code: str) -> ExecutionResult:
    """`code`'s run; a failed one stops the benchmark (it would time the wrong thing)."""
    result = await executor.run(code)
    if not result.success:
        raise RuntimeError(f"{code!r} failed in the sandbox: {result.error}")
    return result


def baseline(times: int) -> list[float]:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-c", "import pandas; print(1)"], check=True, capture_output=True
        )
        samples.append(time.perf_counter() - started)
    return samples


async def measure(args: argparse.Namespace, root: Path) -> dict[str, list[float]]:
    sandbox = resolve_sandbox("bwrap")
    workspaces = Workspaces(root)
    results: dict[str, list[float]] = {}

    cold: list[float] = []
    for number in range(args.cold):
        executor = SandboxedExecutor(
            workspaces.ensure(session_key(1, f"cold-{number}")), LIMITS, sandbox
        )
        started = time.perf_counter()
        await run(executor, "print(1)")
        cold.append(time.perf_counter() - started)
        await executor.close()
    results["cold first run"] = cold

    async with SandboxedExecutor(
        workspaces.ensure(session_key(1, "warm")), LIMITS, sandbox
    ) as executor:
        await run(executor, SETUP)
        await timed(lambda: run(executor, "print(1)"), args.warmup)
        results["warm print(1)"] = await timed(lambda: run(executor, "print(1)"), args.runs)
        results["group-by 100k rows"] = await timed(lambda: run(executor, GROUP_BY), args.runs // 4)
        after_rollback = []
        for _ in range(args.runs // 4):
            await executor.run("value = 1 / 0")  # fails, so the run is rolled back
            started = time.perf_counter()
            await run(executor, "print(1)")
            after_rollback.append(time.perf_counter() - started)
        results["after a rollback"] = after_rollback
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--cold", type=int, default=10)
    parser.add_argument("--baseline", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=10, help="warm runs not timed")
    parser.add_argument("--smoke", action="store_true", help="a few runs of each, to check it runs")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.cold, args.baseline, args.warmup = 4, 1, 1, 1
    with tempfile.TemporaryDirectory() as tmp:
        results = asyncio.run(measure(args, Path(tmp)))
    results["baseline: python -c 'import pandas'"] = baseline(args.baseline)
    base_p50 = percentile(results["baseline: python -c 'import pandas'"], 50)
    print(f"{'':38} {'p50':>9} {'p95':>9}   baseline p50 / p50")
    for name, samples in results.items():
        p50, p95 = percentile(samples, 50), percentile(samples, 95)
        print(f"{name:38} {p50 * 1000:7.1f}ms {p95 * 1000:7.1f}ms   {base_p50 / p50:8.1f}x")


if __name__ == "__main__":
    main()
