"""What does Ray add to a run, and what does a second node give? (EXECUTOR_BACKEND=ray)

Everything runs on this machine, against baselines measured in the same run:

1. Latency: one session's warm `print(1)`, `--runs` times, through the local ExecutorPool
   (today's warm worker, a child of this process), then through RayExecutorPool on a
   loopback cluster (a 0-CPU head and 2 sandbox nodes, tests/support/ray_cluster.py),
   first without WORKSPACE_BUCKET (Ray alone), then with it (SeaweedFS on 127.0.0.1, when
   its binary is installed: two S3 syncs on each side of every run). Prints p50/p99 and the
   added ms at p50 against local (goal: Ray alone adds under 5 ms), and a new session's
   first run (cold: for Ray, a new actor and its worker too).
2. Throughput: `--sessions` sessions at once, each `--rounds` runs in a row (after a first,
   cold run each), of `print(1)` and of a ~20 ms pure-Python loop: runs/s through the local
   pool, then on a cluster with 1 sandbox node, then with 2, and 2 nodes / 1 node; with
   the peak RSS and PSS of this process's tree (the cluster's processes and sandboxes)
   while each ran. On one machine both nodes share its cores: this shows what the second
   node costs or gains here, not what a second machine adds.

    .venv/bin/python -m benchmarks.ray_executor [--runs 300] [--sessions 32] [--rounds 10]
        [--smoke]

`--smoke`: a few runs and sessions, one cluster of a head and 1 sandbox node for every
part (no 2-node figures), to check that it runs (`make test` does); it fails when a run
does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Protocol

from backend.config import load_settings
from backend.storage.mirror import WorkspaceMirror
from backend.storage.sessions import SessionKey, session_key
from backend.storage.workspaces import Workspaces
from backend.tools.sandbox.availability import resolve_sandbox
from backend.tools.sandbox.executor import BasePythonExecutor, ExecutionResult
from backend.tools.sandbox.pool import ExecutorPool
from backend.tools.sandbox.ray_pool import RayExecutorPool
from benchmarks.executor_latency import percentile
from benchmarks.load import MB, TreeMemory, sampled
from tests.support.ray_cluster import LoopbackCluster, ray_cluster, ray_settings
from tests.support.seaweedfs import S3Server, seaweedfs, weed_binary

WORKLOADS = {"print(1)": "print(1)", "loop ~20 ms": "print(sum(i * i for i in range(300_000)))"}
LATENCY_ROWS = ("local pool", "Ray, no WORKSPACE_BUCKET", "Ray + WORKSPACE_BUCKET (SeaweedFS)")


class Pool(Protocol):
    def get_python_executor(self, session_id: SessionKey) -> BasePythonExecutor: ...


def new_session(tag: str) -> SessionKey:
    """A new session's key (pools and workspaces take keys: backend/storage/sessions.py)."""
    return session_key(1, f"bench-{tag}-{uuid.uuid4().hex[:8]}")


async def warm_latency(pool: Pool, args: argparse.Namespace, failures: list[str]) -> list[float]:
    executor = pool.get_python_executor(new_session("warm"))
    for _ in range(args.warmup):  # the first run starts the sandbox; the rest warm the path
        await executor.run("print(1)")
    return await timed(partial(executor.run, "print(1)"), args.runs, failures)


async def cold_latency(pool: Pool, args: argparse.Namespace, failures: list[str]) -> list[float]:
    samples: list[float] = []
    for _ in range(args.cold):
        executor = pool.get_python_executor(new_session("cold"))
        samples += await timed(partial(executor.run, "print(1)"), 1, failures)
    return samples


async def timed(
    action: Callable[[], Awaitable[ExecutionResult]], times: int, failures: list[str]
) -> list[float]:
    """Wall times of the successful runs; the errors of the others go to `failures`."""
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        result = await action()
        if result.success:
            samples.append(time.perf_counter() - started)
        else:
            failures.append(str(result.error))
    return samples


async def throughput(pool: Pool, sessions: int, rounds: int) -> dict[str, tuple[float, int]]:
    """Runs/s and failed runs per workload, all sessions at once."""
    executors = [pool.get_python_executor(new_session(f"tp{n}")) for n in range(sessions)]
    await asyncio.gather(*(executor.run("x = 1") for executor in executors))  # cold starts
    found: dict[str, tuple[float, int]] = {}
    for name, code in WORKLOADS.items():

        async def one(executor: BasePythonExecutor, code: str = code) -> int:
            failures = 0
            for _ in range(rounds):
                failures += not (await executor.run(code)).success
            return failures

        started = time.perf_counter()
        failures = sum(await asyncio.gather(*(one(executor) for executor in executors)))
        found[name] = (sessions * rounds / (time.perf_counter() - started), failures)
    return found


def ray_pool(cluster: LoopbackCluster, root: Path, s3: S3Server | None = None) -> RayExecutorPool:
    more: dict[str, object] = {}
    if s3 is not None:
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        s3.client().create_bucket(Bucket=bucket)
        more = {
            "WORKSPACE_BUCKET": bucket,
            "S3_ENDPOINT_URL": s3.endpoint,
            "S3_ACCESS_KEY_ID": s3.access_key,
            "S3_SECRET_ACCESS_KEY": s3.secret_key,
            "S3_REGION": s3.region,
        }
    api = root / f"api-{uuid.uuid4().hex[:6]}"
    settings = ray_settings(cluster.address, api / "data", root / "ray-cache", **more)
    mirror = WorkspaceMirror.from_settings(settings, api / "manifests")
    return RayExecutorPool(settings, Workspaces(settings.DATA_DIR), mirror)


@contextlib.contextmanager
def maybe_s3(root: Path, smoke: bool) -> Iterator[S3Server | None]:
    if smoke:
        print("  (--smoke: the WORKSPACE_BUCKET row is left out)")
        yield None
        return
    if weed_binary() is None:
        print("  (no SeaweedFS `weed` binary: the WORKSPACE_BUCKET row is left out)")
        yield None
        return
    with seaweedfs(root / "seaweedfs") as server:
        yield server


def report_latency(results: dict[str, list[float]], baseline: str) -> None:
    base = percentile(results[baseline], 50)
    print(f"  {'':34} {'p50':>9} {'p99':>9}   added at p50   ratio p50")
    for name, samples in results.items():
        p50, p99 = percentile(samples, 50), percentile(samples, 99)
        print(
            f"  {name:34} {p50 * 1000:6.2f} ms {p99 * 1000:6.2f} ms"
            f"   {(p50 - base) * 1000:+8.2f} ms   {p50 / base:8.2f}x"
        )


def report_memory(name: str, peaks: TreeMemory) -> None:
    pss = f", PSS {peaks.tree_pss / MB:,.0f} MB" if peaks.tree_pss else ""
    print(
        f"  {name}: peak of this process's tree: {peaks.processes} processes, "
        f"RSS {peaks.tree_rss / MB:,.0f} MB{pss}"
    )


async def local_part(
    args: argparse.Namespace, root: Path, failures: list[str]
) -> tuple[list[float], list[float]]:
    settings = load_settings(DATA_DIR=root / "local", SANDBOX="bwrap")
    pool = ExecutorPool(settings, resolve_sandbox("bwrap"), Workspaces(settings.DATA_DIR))
    try:
        return await warm_latency(pool, args, failures), await cold_latency(pool, args, failures)
    finally:
        await pool.close_all()


async def local_throughput(args: argparse.Namespace, root: Path) -> dict[str, tuple[float, int]]:
    settings = load_settings(DATA_DIR=root / "local-tp", SANDBOX="bwrap")
    pool = ExecutorPool(settings, resolve_sandbox("bwrap"), Workspaces(settings.DATA_DIR))
    try:
        with sampled(os.getpid()) as peaks:
            found = await throughput(pool, args.sessions, args.rounds)
        report_memory("local pool", peaks)
        return found
    finally:
        await pool.close_all()


def ray_throughput(
    args: argparse.Namespace, cluster: LoopbackCluster, root: Path
) -> dict[str, tuple[float, int]]:
    nodes = len(cluster.nodes)
    with sampled(os.getpid()) as peaks:
        found = asyncio.run(throughput(ray_pool(cluster, root), args.sessions, args.rounds))
    report_memory(f"Ray, {nodes} node(s), head included", peaks)
    return found


def ray_name(nodes: int) -> str:
    return f"Ray, {nodes} node{'s' if nodes > 1 else ''}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--cold", type=int, default=5, help="new sessions' first runs")
    parser.add_argument("--warmup", type=int, default=20, help="untimed runs before the warm ones")
    parser.add_argument("--smoke", action="store_true", help="a little of each, to check it runs")
    args = parser.parse_args()
    if args.smoke:
        args.runs, args.sessions, args.rounds, args.cold, args.warmup = 3, 2, 1, 1, 2
    latency_nodes = 1 if args.smoke else 2
    rates: dict[str, dict[str, tuple[float, int]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print(f"1. Latency: one session's warm print(1), {args.runs} runs each")
        failures: dict[str, list[str]] = {name: [] for name in LATENCY_ROWS}
        warm, cold = asyncio.run(local_part(args, root, failures["local pool"]))
        latency = {"local pool": warm}
        colds = {"local pool": cold}
        with maybe_s3(root, args.smoke) as s3:
            started = time.perf_counter()
            with ray_cluster(nodes=latency_nodes) as cluster:
                took = time.perf_counter() - started
                print(f"  (a head and {latency_nodes} sandbox node(s) started in {took:.1f} s)")
                pools = {LATENCY_ROWS[1]: ray_pool(cluster, root)}
                if s3 is not None:
                    pools[LATENCY_ROWS[2]] = ray_pool(cluster, root, s3)
                for name, pool in pools.items():
                    latency[name] = asyncio.run(warm_latency(pool, args, failures[name]))
                    colds[name] = asyncio.run(cold_latency(pool, args, failures[name]))
                if args.smoke:  # part 2 on the same cluster: one start less
                    rates[ray_name(latency_nodes)] = ray_throughput(args, cluster, root)
        report_latency(latency, "local pool")
        print(f"  a new session's first run (cold), {args.cold} sessions:")
        report_latency(colds, "local pool")
        for name, errors in failures.items():
            if errors:
                print(f"  {name}: {len(errors)} failed run(s) left out (goal 0), e.g. {errors[0]}")

        print(f"\n2. Throughput: {args.sessions} sessions at once, {args.rounds} runs each")
        rates = {"local pool": asyncio.run(local_throughput(args, root)), **rates}
        for nodes in () if args.smoke else (1, 2):
            with ray_cluster(nodes=nodes) as cluster:
                rates[ray_name(nodes)] = ray_throughput(args, cluster, root)
        print(f"  {'':20}" + "".join(f" {name:>22}" for name in WORKLOADS))
        for name, found in rates.items():
            cells = "".join(
                f" {rate:14.1f} runs/s" + (f" ({failures} failed)" if failures else "")
                for rate, failures in found.values()
            )
            print(f"  {name:20}{cells}")
        if len(rates) > 2:
            two, one = rates[ray_name(2)], rates[ray_name(1)]
            print(
                "  2 nodes / 1 node:   "
                + "".join(f" {two[name][0] / one[name][0]:21.2f}x" for name in WORKLOADS)
            )
            print(f"  os.cpu_count() = {os.cpu_count()}: both nodes share these cores")
    failed = sum(map(len, failures.values())) + sum(
        n for r in rates.values() for _, n in r.values()
    )
    if args.smoke and failed:
        raise SystemExit(f"--smoke: {failed} run(s) failed")


if __name__ == "__main__":
    main()
