"""Load: concurrent streams, concurrent sandboxes, and memory over many turns.

Three parts, each against a baseline measured in the same run. Every server it starts has
the bounds on one user's turns at once raised (USER_MAX_RUNS, WORK_LIMITS' chat_stream):
the benchmark is one user, whose 64 concurrent streams the defaults would refuse but 2.

1. Streams: a fake OpenAI-compatible upstream on loopback (tests/support/fake_openai.py, in
   its own process) behind our server (LLM_BACKEND=openai). Each round sends 64 concurrent
   streaming `/v1/chat/completions` requests straight to the upstream, then 64 through the
   floor, then 64 through the server; 3 rounds after one of each to warm up. Prints errors
   (goal 0) and the p50/p99 wall time of a whole stream through the server against direct.
   For scale, the same through the floor of gateway_overhead.py (baseline_proxy.py, a
   minimal pass-through proxy): on a small machine any proxy is a third busy process.
2. Sandboxes: 32 sessions, each with its own sandbox, through `POST /api/tools/python_coder`
   with `{"session_id", "code"}` (custom-code mode). All 32 start at once (a cold first
   run that builds a 100k-row frame), then each runs 5 rounds of `print(1)` and a pandas
   group-by over its frame, all at once. Prints errors (goal 0) and p50/p99 of each kind
   of run against the same runs one session at a time, and the peak memory while the 32
   ran: the server process's RSS, and the sum over it and its descendants (the sandboxes):
   RSS, and PSS, which counts shared pages once; sampled from /proc every 0.25 s.
3. Memory: a second server, with the scripted model, answers 200 warm-up turns and then
   2,000 sequential `/api/chat` turns (plain chat, streamed every other turn, a new session
   every 10 turns). Prints the server's RSS after the 2,000 turns against after the
   warm-up (goal: flat, within 10%), and along the way, with the turns' latency against
   the first ones'.

    .venv/bin/python -m benchmarks.load [--streams 64] [--rounds 3] [--sessions 32]
        [--runs 5] [--turns 2000]

With `--observability`, instead: the cost of metrics and traces. Three servers on the same
fake upstream, started in the same run: one with METRICS_ENABLED=false and no OTLP
endpoint; two with METRICS_ENABLED=true, `/metrics` scraped every `--scrape-interval`
seconds, and OTEL_EXPORTER_OTLP_ENDPOINT pointing at a receiver on loopback that accepts
spans and drops them, one sampling every span (`parentbased_always_on`) and one with the
sampler docs/observability.md recommends (`parentbased_traceidratio`, `--sample-ratio`).
`--observability-rounds` rounds of part 1's 64 concurrent streams and
`--observability-turns` sequential `/api/chat` plain-chat turns, the servers taking turns
(each takes each place in the order in turn, so machine noise hits all alike). Prints,
for each traced server against the untraced one, the p50/p99 of each and the ratio (goals:
p50 <= 1.05 with every span sampled, <= 1.01 with the recommended sampler), with a 95%
interval of the streams' ratio (the rounds resampled), and the servers' CPU per stream and
per turn. A round's p50 alone wanders by ±10%, so it takes about a hundred rounds on a
quiet machine to tell 1% from 2%.

    .venv/bin/python -m benchmarks.load --observability [--observability-rounds 100]
        [--observability-turns 200] [--scrape-interval 5] [--sample-ratio 0.1]

`--smoke` (with or without `--observability`): a few streams, sessions and turns of each
part, to check that it runs (`make test` does); it fails when a request does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.executor_latency import GROUP_BY, SETUP
from benchmarks.gateway_overhead import (
    concurrent,
    percentile,
    report,
    stream_once,
    wait_for_port,
)
from tests.support.live_server import ROOT, LiveServer, free_port
from tests.support.otlp_receiver import Receiver, receiving
from tests.support.processes import descendants

PASSWORD = "benchmark-password"
SCRIPTED_ANSWER = "A scripted answer of a dozen words, the same for every turn of this run."
COLD = "first run (cold)"
RUNS: dict[str, str] = {"print(1)": "print(1)", "group-by 100k rows": GROUP_BY}
MB = 1024**2
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# Memory, from /proc


def _status_kb(pid: int, field_name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field_name}:"):
            return int(line.split()[1])
    return 0


def _pss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """The process's CPU time so far (user and system), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def rss(pid: int) -> int:
    """The process's resident memory in bytes."""
    return _status_kb(pid, "VmRSS") * 1024


@dataclass
class TreeMemory:
    """Peaks, in bytes, over the samples taken."""

    server_rss: int = 0
    tree_rss: int = 0
    tree_pss: int = 0  # 0 where some process's smaps_rollup cannot be read
    processes: int = 0

    def sample(self, pid: int) -> None:
        total_rss = total_pss = count = 0
        readable = True  # every process's PSS
        for member in [pid, *descendants(pid)]:
            try:
                total_rss += _status_kb(member, "VmRSS") * 1024
                count += 1
                total_pss += _pss_kb(member) * 1024
            except PermissionError:
                readable = False
            except (OSError, ValueError):
                continue  # it exited while we looked
        self.server_rss = max(self.server_rss, rss(pid))
        self.tree_rss = max(self.tree_rss, total_rss)
        self.tree_pss = max(self.tree_pss, total_pss) if readable else 0
        self.processes = max(self.processes, count)


@contextmanager
def sampled(pid: int, every: float = 0.25) -> Iterator[TreeMemory]:
    """The peaks of the process tree under `pid`, sampled every `every` seconds meanwhile."""
    peaks = TreeMemory()
    peaks.sample(pid)
    done = threading.Event()

    def loop() -> None:
        while not done.wait(every):
            peaks.sample(pid)

    sampler = threading.Thread(target=loop, daemon=True)
    sampler.start()
    try:
        yield peaks
    finally:
        done.set()
        sampler.join()
        peaks.sample(pid)


# Part 1: concurrent streams


async def one_round(
    clients: list[httpx.AsyncClient], url: str, headers: dict[str, str]
) -> tuple[list[float], int]:
    """One stream per client, all at once: the wall times of those that ended, and errors.

    A client each, not one shared: httpcore's pool scans all its connections for every
    request it assigns, so one client with 64 warm connections spends more CPU on its own
    bookkeeping than on the streams, and the benchmark measures itself.
    """
    results = await asyncio.gather(*(concurrent(c, url, headers, 1, 1) for c in clients))
    return [t for totals, _ in results for t in totals], sum(errors for _, errors in results)


async def streams(
    args: argparse.Namespace, upstream_url: str, floor_url: str, server: LiveServer
) -> int:
    """Part 1's figures, printed; the number of failed streams."""
    auth = {"Authorization": f"Bearer {server.token()}"}
    paths = {
        "direct": (f"{upstream_url}/chat/completions", {}),
        "via floor": (f"{floor_url}/chat/completions", {}),
        "via server": (f"{server.url}/v1/chat/completions", auth),
    }
    times: dict[str, list[float]] = {name: [] for name in paths}
    errors = dict.fromkeys(paths, 0)
    async with AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(timeout=120))
            for _ in range(args.streams)
        ]
        for url, headers in paths.values():  # warm up: connections, caches
            await one_round(clients, url, headers)
        for _ in range(args.rounds):  # alternate rounds, so machine noise hits all alike
            for name, (url, headers) in paths.items():
                totals, failed = await one_round(clients, url, headers)
                times[name] += totals
                errors[name] += failed
    print(
        f"Streams: {args.streams} concurrent /v1/chat/completions, {args.rounds} rounds "
        f"(upstream: {args.tokens} tokens, {args.delay_ms:g} ms apart, ideal "
        f"{args.tokens * args.delay_ms:g} ms)"
    )
    print("  errors: " + ", ".join(f"{name} {count}" for name, count in errors.items()), "(goal 0)")
    if all(times.values()):
        report("request", times["direct"], times["via server"])
        report("request", times["direct"], times["via floor"], via="via floor ")
    return sum(errors.values())


# Part 2: concurrent sandboxes


@dataclass
class Runs:
    """Wall times of python_coder runs by kind, and the failures."""

    times: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add(self, kind: str, seconds: float) -> None:
        self.times.setdefault(kind, []).append(seconds)


async def run_code(client: httpx.AsyncClient, session: str, code: str) -> float:
    """One custom-code run; its wall time. Raises on an HTTP error or a failed run."""
    started = time.perf_counter()
    response = await client.post(
        "/api/tools/python_coder", json={"session_id": session, "code": code}
    )
    response.raise_for_status()
    result = response.json()
    if not result["success"]:
        raise RuntimeError(f"run failed: {result.get('error')}")
    return time.perf_counter() - started


async def attempt(
    client: httpx.AsyncClient, session: str, kind: str, code: str, runs: Runs
) -> bool:
    """One run, recorded under `kind` or as an error; whether it succeeded."""
    try:
        runs.add(kind, await run_code(client, session, code))
        return True
    except (httpx.HTTPError, RuntimeError, KeyError) as exc:
        runs.errors.append(f"{session} {kind}: {type(exc).__name__}: {str(exc)[:300]}")
        return False


async def warm_rounds(client: httpx.AsyncClient, session: str, rounds: int, runs: Runs) -> None:
    """`rounds` of each kind in RUNS, until one fails."""
    for _ in range(rounds):
        for kind, code in RUNS.items():
            if not await attempt(client, session, kind, code, runs):
                return


def report_runs(baseline: Runs, loaded: Runs) -> None:
    print(f"  {'':20} {'alone p50':>10} {'p99':>9} {'loaded p50':>11} {'p99':>9}   ratio p50  p99")
    for kind, alone in baseline.times.items():
        under_load = loaded.times.get(kind)
        if not under_load:
            print(f"  {kind:20} no successful run under load")
            continue
        a50, a99 = percentile(alone, 50), percentile(alone, 99)
        l50, l99 = percentile(under_load, 50), percentile(under_load, 99)
        print(
            f"  {kind:20} {a50 * 1000:8.0f}ms {a99 * 1000:7.0f}ms {l50 * 1000:9.0f}ms "
            f"{l99 * 1000:7.0f}ms   {l50 / a50:8.1f}x {l99 / a99:5.1f}x"
        )


async def sandboxes(args: argparse.Namespace, server: LiveServer) -> int:
    """Part 2's figures, printed; the number of failed runs."""
    assert server.process is not None
    pid = server.process.pid
    headers = {"Authorization": f"Bearer {server.token()}"}
    baseline, loaded = Runs(), Runs()
    async with AsyncExitStack() as stack:
        clients = [  # a client each: see one_round
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=server.url, headers=headers, timeout=600)
            )
            for _ in range(args.sessions)
        ]
        for number in range(args.baseline_cold):  # one at a time; the first does the rounds
            await attempt(clients[0], f"alone-{number}", COLD, SETUP, baseline)
        await warm_rounds(clients[0], "alone-0", args.baseline_runs, baseline)
        before = TreeMemory()
        before.sample(pid)
        sessions = [(client, f"load-{n}") for n, client in enumerate(clients)]
        started = time.perf_counter()
        with sampled(pid) as peaks:
            cold = await asyncio.gather(*(attempt(c, s, COLD, SETUP, loaded) for c, s in sessions))
            started_ok = [session for session, ok in zip(sessions, cold, strict=True) if ok]
            await asyncio.gather(*(warm_rounds(c, s, args.runs, loaded) for c, s in started_ok))
        wall = time.perf_counter() - started
    print(
        f"Sandboxes: {args.sessions} sessions at once: all start (a cold first run that builds "
        f"the frame), then each runs {args.runs} rounds of {' and '.join(RUNS)}; {wall:.1f} s "
        f"in all. Baseline: one session at a time ({args.baseline_cold} cold starts, "
        f"{args.baseline_runs} rounds)"
    )
    print(f"  errors: {len(loaded.errors)} (goal 0); alone: {len(baseline.errors)}")
    for error in (baseline.errors + loaded.errors)[:5]:
        print(f"    {error}")
    report_runs(baseline, loaded)
    pss = f", PSS {peaks.tree_pss / MB:.0f} MB" if peaks.tree_pss else ""
    print(
        f"  peak memory: server process RSS {peaks.server_rss / MB:.0f} MB "
        f"(before the load {before.server_rss / MB:.0f} MB); server and its "
        f"{peaks.processes - 1} descendants: RSS {peaks.tree_rss / MB:.0f} MB{pss} "
        f"(before the load: {before.processes - 1} descendants, RSS "
        f"{before.tree_rss / MB:.0f} MB)"
    )
    return len(baseline.errors) + len(loaded.errors)


# Part 3: memory over many turns


async def chat_turn(client: httpx.AsyncClient, session: str | None, stream: bool) -> str:
    """One plain chat turn; the session it went to (a new one when `session` is None)."""
    body: dict[str, Any] = {"message": "benchmark", "agent_type": "chat", "stream": stream}
    if session:
        body["session_id"] = session
    answer: dict[str, Any] | None = None
    if stream:
        async with client.stream("POST", "/api/chat", json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                event = json.loads(line[6:]) if line.startswith("data: ") else {}
                if event.get("type") == "error":
                    raise RuntimeError(f"error event: {event}")
                if event.get("type") == "final":
                    answer = {"answer": event["text"], "session_id": event["session_id"]}
    else:
        response = await client.post("/api/chat", json=body)
        response.raise_for_status()
        answer = response.json()
    if answer is None:
        raise RuntimeError("the stream ended without its final event")
    if answer["answer"] != SCRIPTED_ANSWER:
        raise RuntimeError(f"unexpected answer: {answer['answer'][:200]!r}")
    return str(answer["session_id"])


async def turns(
    client: httpx.AsyncClient, count: int, per_session: int, errors: list[str]
) -> list[float]:
    """`count` sequential turns, alternating streamed and not; their wall times."""
    times: list[float] = []
    session: str | None = None
    for number in range(count):
        if number % per_session == 0:
            session = None
        started = time.perf_counter()
        try:
            session = await chat_turn(client, session, stream=number % 2 == 1)
        except (httpx.HTTPError, RuntimeError, KeyError) as exc:
            errors.append(f"turn {number}: {type(exc).__name__}: {str(exc)[:300]}")
            session = None
        times.append(time.perf_counter() - started)
    return times


async def memory_growth(args: argparse.Namespace, server: LiveServer) -> int:
    """Part 3's figures, printed; the number of failed turns."""
    assert server.process is not None
    pid = server.process.pid
    headers = {"Authorization": f"Bearer {server.token()}"}
    errors: list[str] = []
    steps: list[tuple[int, int, list[float]]] = []  # turns so far, RSS, the step's times
    async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=120) as client:
        await turns(client, args.warmup, args.session_turns, errors)
        warm = rss(pid)
        step = max(1, args.turns // args.steps)
        for done in range(0, args.turns, step):
            count = min(step, args.turns - done)
            times = await turns(client, count, args.session_turns, errors)
            steps.append((done + count, rss(pid), times))
    print(
        f"Memory: {args.turns} sequential /api/chat turns (plain chat, scripted model, "
        f"streamed every other turn, {args.session_turns} per session) after "
        f"{args.warmup} warm-up turns"
    )
    print(f"  errors: {len(errors)} (goal 0)")
    for error in errors[:5]:
        print(f"    {error}")
    final = steps[-1][1]
    print(
        f"  server RSS: {warm / MB:.1f} MB after the warm-up, {final / MB:.1f} MB after "
        f"{args.turns} turns: ratio {final / warm:.3f} (goal <= 1.10)"
    )
    first = steps[0][2]
    print(f"  along the way (turn p50 and p99 against the first {len(first)} turns'):")
    for done, resident, times in steps:
        print(
            f"    after {done:5} turns: RSS {resident / MB:6.1f} MB ({resident / warm:.3f}), "
            f"turn p50 {percentile(times, 50) / percentile(first, 50):.2f}x, "
            f"p99 {percentile(times, 99) / percentile(first, 99):.2f}x"
        )
    print(f"  (the first turns: p50 {percentile(first, 50) * 1000:.1f} ms)")
    return len(errors)


# Part 4 (--observability): metrics and traces on against off

# The ratio docs/observability.md recommends for parentbased_traceidratio.
SAMPLE_RATIO = 0.1


async def plain_turn(client: httpx.AsyncClient) -> float:
    """One non-streamed plain-chat `/api/chat` turn in a new session; its wall time."""
    started = time.perf_counter()
    response = await client.post("/api/chat", json={"message": "benchmark", "agent_type": "chat"})
    response.raise_for_status()
    if not response.json().get("answer"):
        raise RuntimeError(f"no answer: {response.text[:200]}")
    return time.perf_counter() - started


async def scrape(client: httpx.AsyncClient, every: float, done: asyncio.Event) -> int:
    """GET /metrics every `every` seconds, as Prometheus would, until `done`; how many."""
    count = 0
    while not done.is_set():
        response = await client.get("/metrics")
        response.raise_for_status()
        count += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), every)
    return count


@dataclass
class Side:
    """One server's figures: stream times by round, turn times, and what failed."""

    rounds: list[list[float]] = field(default_factory=list)
    turns: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stream_cpu: float = 0.0  # the server's CPU seconds over its stream rounds
    turn_cpu: float = 0.0  # and over its turns

    @property
    def streams(self) -> list[float]:
        return [t for times in self.rounds for t in times]


async def stream_round(
    clients: list[httpx.AsyncClient], url: str, headers: dict[str, str], side: Side | None
) -> None:
    """One stream per client, all at once, into `side` (None: a warm-up)."""

    async def one(client: httpx.AsyncClient) -> float | None:
        try:
            return (await stream_once(client, url, headers)).total
        except (httpx.HTTPError, RuntimeError) as exc:
            if side is not None:
                side.errors.append(f"stream: {type(exc).__name__}: {str(exc)[:200]}")
            return None

    results = await asyncio.gather(*(one(client) for client in clients))
    if side is not None:
        side.rounds.append([t for t in results if t is not None])


def interval(
    off: list[list[float]], on: list[list[float]], draws: int = 1000
) -> tuple[float, float]:
    """A 95% interval of the pooled p50 ratio on/off: the rounds drawn again with
    replacement (a round of each server together, as they ran), `draws` times."""
    rng = random.Random(0)
    ratios = []
    for _ in range(draws):
        picks = [rng.randrange(len(off)) for _ in off]
        a = [t for i in picks for t in off[i]]
        b = [t for i in picks for t in on[i]]
        ratios.append(percentile(b, 50) / percentile(a, 50))
    ratios.sort()
    return ratios[int(0.025 * draws)], ratios[int(0.975 * draws) - 1]


def print_ratio(label: str, off: list[float], on: list[float], goal: float) -> None:
    for q in (50, 99):
        a, b = percentile(off, q), percentile(on, q)
        target = f" (goal <= {goal:.2f})" if q == 50 else ""
        print(
            f"    {label:<22} p{q}: off {a * 1000:8.2f} ms   on {b * 1000:8.2f} ms   "
            f"ratio {b / a:6.4f}{target}"
        )


@dataclass(frozen=True)
class Traced:
    """A server with metrics and traces on, its sampler, and the p50 ratio it may cost."""

    name: str
    label: str
    sampler: str
    sampler_arg: str
    goal: float


def traced_servers(ratio: float) -> list[Traced]:
    """Every span sampled, and the sampler that docs/observability.md recommends."""
    return [
        Traced("all", "every span sampled", "parentbased_always_on", "", 1.05),
        Traced(
            "sampled",
            f"parentbased_traceidratio {ratio:g} (the recommended sampler)",
            "parentbased_traceidratio",
            f"{ratio:g}",
            1.01,
        ),
    ]


def report_side(args: argparse.Namespace, traced: Traced, off: Side, on: Side) -> None:
    """One traced server's figures against the untraced one's."""
    print(f"  {traced.label}:")
    if off.streams and on.streams:
        print_ratio(f"stream ({args.streams} at once)", off.streams, on.streams, traced.goal)
        paired = [
            percentile(b, 50) / percentile(a, 50)
            for a, b in zip(off.rounds, on.rounds, strict=True)
            if a and b
        ]
        low, high = interval(off.rounds, on.rounds)
        print(f"    {'':22} p50 ratio's 95% interval (rounds resampled): {low:6.4f} to {high:6.4f}")
        print(
            f"    {'':22} median over rounds of the round's p50 ratio: "
            f"{percentile(paired, 50):6.4f} (min {min(paired):.3f}, max {max(paired):.3f})"
        )
    if off.turns and on.turns:
        print_ratio("turn (sequential)", off.turns, on.turns, traced.goal)
    # The servers' CPU time: what the load costs each, whatever the machine's noise (counted
    # in clock ticks, so a short run can take none).
    for label, a, b, count in (
        ("stream", off.stream_cpu, on.stream_cpu, args.streams * args.observability_rounds),
        ("turn", off.turn_cpu, on.turn_cpu, args.observability_turns),
    ):
        print(
            f"    server CPU per {label:<7}     off {a / count * 1000:8.2f} ms   "
            f"on {b / count * 1000:8.2f} ms   ratio {b / a if a else float('nan'):6.4f}"
        )


async def observability(
    args: argparse.Namespace, servers: dict[str, LiveServer], receiver: Receiver
) -> int:
    """Part 4's figures, printed; the number of failed streams and turns."""
    names = list(servers)  # "off", then the traced ones
    traced = traced_servers(args.sample_ratio)
    auth = {name: {"Authorization": f"Bearer {s.token()}"} for name, s in servers.items()}
    urls = {name: f"{s.url}/v1/chat/completions" for name, s in servers.items()}
    sides = {name: Side() for name in names}
    pids = {name: s.process.pid for name, s in servers.items() if s.process is not None}
    done = asyncio.Event()

    def order(number: int) -> list[str]:
        # Each server takes each place in turn, so drift and noise fall on all alike.
        shift = number % len(names)
        return names[shift:] + names[:shift]

    async with AsyncExitStack() as stack:
        clients = [  # a client each: see one_round
            await stack.enter_async_context(httpx.AsyncClient(timeout=120))
            for _ in range(args.streams)
        ]
        turn_clients = {
            name: await stack.enter_async_context(
                httpx.AsyncClient(base_url=s.url, headers=auth[name], timeout=120)
            )
            for name, s in servers.items()
        }
        scrapers = [
            asyncio.create_task(scrape(turn_clients[t.name], args.scrape_interval, done))
            for t in traced
        ]
        for name in names:  # warm up: connections, caches
            await stream_round(clients, urls[name], auth[name], None)
            await plain_turn(turn_clients[name])
        for number in range(args.observability_rounds):
            for name in order(number):
                before = cpu_seconds(pids[name])
                await stream_round(clients, urls[name], auth[name], sides[name])
                sides[name].stream_cpu += cpu_seconds(pids[name]) - before
        for number in range(args.observability_turns):
            for name in order(number):
                before = cpu_seconds(pids[name])
                try:
                    sides[name].turns.append(await plain_turn(turn_clients[name]))
                except (httpx.HTTPError, RuntimeError, KeyError) as exc:
                    sides[name].errors.append(f"turn: {type(exc).__name__}: {str(exc)[:200]}")
                sides[name].turn_cpu += cpu_seconds(pids[name]) - before
        done.set()
        scrapes = sum(await asyncio.gather(*scrapers))
    print(
        f"Observability: metrics and traces off against on (METRICS_ENABLED, /metrics scraped "
        f"every {args.scrape_interval:g} s: {scrapes} scrapes; OTLP/HTTP to a loopback "
        f"receiver that drops them: {receiver.exports} exports, {receiver.bytes / 1024:.0f} KiB)"
    )
    print(
        f"  {args.streams} concurrent /v1/chat/completions streams, "
        f"{args.observability_rounds} rounds each, and {args.observability_turns} sequential "
        f"/api/chat turns each, the {len(names)} servers taking turns (upstream: "
        f"{args.tokens} tokens, {args.delay_ms:g} ms apart)"
    )
    print("  errors: " + ", ".join(f"{n} {len(s.errors)}" for n, s in sides.items()), "(goal 0)")
    for error in [e for side in sides.values() for e in side.errors][:5]:
        print(f"    {error}")
    for each in traced:
        report_side(args, each, sides["off"], sides[each.name])
    return sum(len(side.errors) for side in sides.values())


def observability_main(args: argparse.Namespace, tmp: Path) -> int:
    upstream = ("--tokens", str(args.tokens), "--delay-ms", str(args.delay_ms))
    model = {"LLM_BACKEND": "openai", "OPENAI_MODEL": "fake-upstream", "MODEL_PROBE": "false"}
    with contextlib.ExitStack() as stack:
        upstream_url = stack.enter_context(serving("tests.support.fake_openai", *upstream))
        receiver = stack.enter_context(receiving(keep=False))
        servers = {
            "off": stack.enter_context(
                live(
                    tmp / "off",
                    **model,
                    OPENAI_BASE_URL=upstream_url,
                    METRICS_ENABLED="false",
                    OTEL_EXPORTER_OTLP_ENDPOINT="",  # empty: off, whatever this environment says
                    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="",
                )
            )
        }
        for traced in traced_servers(args.sample_ratio):
            servers[traced.name] = stack.enter_context(
                live(
                    tmp / traced.name,
                    **model,
                    OPENAI_BASE_URL=upstream_url,
                    METRICS_ENABLED="true",
                    OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
                    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="",
                    OTEL_TRACES_SAMPLER=traced.sampler,
                    OTEL_TRACES_SAMPLER_ARG=traced.sampler_arg,
                )
            )
        return asyncio.run(observability(args, servers, receiver))


# Servers


@contextmanager
def serving(module: str, *args: str) -> Iterator[str]:
    """`python -m module --port P *args` in its own process; its base URL (`.../v1`)."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", module, "--port", str(port), *args], cwd=ROOT)
    try:
        wait_for_port(port)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(timeout=10)


@contextmanager
def live(data_dir: Path, **env: str) -> Iterator[LiveServer]:
    # One user sends every stream: with the default bounds on a user's turns at once
    # (USER_MAX_RUNS, 2, and WORK_LIMITS' chat_stream, 4), all but 2 of 64 concurrent
    # streams would be a 429.
    env = {
        "USER_MAX_RUNS": "1024",
        "WORK_LIMITS": json.dumps({"chat_stream": {"total": 1024, "per_user": 1024}}),
        **env,
    }
    server = LiveServer(data_dir, ADMIN_PASSWORD=PASSWORD, LOG_LEVEL="WARNING", **env)
    try:
        yield server.start()
    finally:
        server.stop()
        if server.process is not None and server.process.returncode not in (0, -15):
            print(f"  (server exited with {server.process.returncode}; log: {server.log_path})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=64, help="concurrent streams")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=20, help="tokens per upstream stream")
    parser.add_argument("--delay-ms", type=float, default=5.0, help="between upstream tokens")
    parser.add_argument("--sessions", type=int, default=32, help="concurrent sandbox sessions")
    parser.add_argument("--runs", type=int, default=5, help="rounds per session under load")
    parser.add_argument("--baseline-runs", type=int, default=20, help="rounds of one session")
    parser.add_argument("--baseline-cold", type=int, default=3, help="sessions started alone")
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200, help="turns before the first RSS")
    parser.add_argument("--steps", type=int, default=4, help="RSS samples over the turns")
    parser.add_argument("--session-turns", type=int, default=10, help="turns per session")
    parser.add_argument(
        "--skip", choices=("streams", "sandboxes", "memory"), nargs="*", default=[], help="parts"
    )
    parser.add_argument(
        "--observability", action="store_true", help="only: metrics and traces on against off"
    )
    parser.add_argument("--observability-rounds", type=int, default=100, help="stream rounds")
    parser.add_argument("--observability-turns", type=int, default=200, help="turns per server")
    parser.add_argument(
        "--sample-ratio",
        type=float,
        default=SAMPLE_RATIO,
        help="the recommended sampler's OTEL_TRACES_SAMPLER_ARG",
    )
    parser.add_argument("--scrape-interval", type=float, default=5.0, help="seconds")
    parser.add_argument("--smoke", action="store_true", help="a little of each, to check it runs")
    args = parser.parse_args()
    if args.smoke:
        args.streams, args.rounds, args.tokens, args.delay_ms = 4, 1, 3, 1.0
        args.sessions, args.runs, args.baseline_runs, args.baseline_cold = 2, 1, 1, 1
        args.turns, args.warmup, args.steps, args.session_turns = 4, 2, 2, 2
        args.observability_rounds, args.observability_turns = 2, 2
        args.scrape_interval = 0.5

    errors = 0
    if args.observability:
        with tempfile.TemporaryDirectory() as tmp:
            errors = observability_main(args, Path(tmp))
    else:
        errors = parts(args)
    if args.smoke and errors:
        sys.exit(f"--smoke: {errors} request(s) failed")


def parts(args: argparse.Namespace) -> int:
    """Parts 1 to 3 but those skipped; the number of failed requests."""
    errors = 0
    with tempfile.TemporaryDirectory() as tmp:
        if not {"streams", "sandboxes"} <= set(args.skip):
            upstream = ("--tokens", str(args.tokens), "--delay-ms", str(args.delay_ms))
            with (
                serving("tests.support.fake_openai", *upstream) as upstream_url,
                serving("benchmarks.baseline_proxy", "--upstream", upstream_url) as floor_url,
                live(
                    Path(tmp) / "gateway",
                    LLM_BACKEND="openai",
                    OPENAI_BASE_URL=upstream_url,
                    OPENAI_MODEL="fake-upstream",
                    MODEL_PROBE="false",  # the stand-in answers every call alike
                ) as server,
            ):
                if "streams" not in args.skip:
                    errors += asyncio.run(streams(args, upstream_url, floor_url, server))
                if "sandboxes" not in args.skip:
                    errors += asyncio.run(sandboxes(args, server))
        if "memory" not in args.skip:
            replies = Path(tmp) / "replies.json"
            replies.write_text(json.dumps([{"content": SCRIPTED_ANSWER, "repeat": True}]))
            with live(
                Path(tmp) / "scripted", LLM_BACKEND="scripted", SCRIPTED_REPLIES=str(replies)
            ) as server:
                errors += asyncio.run(memory_growth(args, server))
    return errors


if __name__ == "__main__":
    main()
