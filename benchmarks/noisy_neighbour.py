"""A noisy neighbour: one user hammers every expensive path while another works (issue 40).

One live server on the scripted model, two users made through the admin API: A, whose
disk quota (`max_disk_mb`) an admin sets, and B. A's session holds a big table (a
Parquet file as a run writes it: 20M rows of id, city, k), a 1M-row table for XLSX, and a
big upload for exports; B's a 1,000-row table.

Phase 0 is the baseline: B alone does its ordinary work, round after round: list its
conversations (`GET /api/conversations`), a page of its small table, and a short
python_coder run (`print(sum(range(1000)))`, custom-code mode). Then, one phase per path,
A fires waves of 50 concurrent requests at it from a process of its own (so A's client
does not slow B's), a new wave as the last one ends, while B repeats the same rounds:

- table pages: deep pages of the big table, sorted by the text column;
- CSV downloads of the big table, and XLSX downloads of the 1M-row one (read in full);
- snapshots: ReAct turns, each in a new session, whose code writes fresh data, hard
  links to it and a sparse file, so each turn's snapshot is big unless kept as links;
- exports: `GET /api/sessions/{id}/export` (hashes the big upload);
- chat streams: plain streamed chats (`/api/chat`, agent_type chat), each a slow reply
  (200 words, 50 ms a word).

Per phase: B's p50 and p99 (all of its requests, and p50 by kind) and their ratio to the
baseline's, A's answers by status, the server's peak RSS (sampled every 0.1 s), and A's
disk (its workspaces and snapshots, allocated blocks, each inode once; sampled every
0.1 s) against its quota, with the DuckDB spill under DATA_DIR beside it. Goals: B's p50
within 2x and p99 within 5x of the baseline in every phase; the server's RSS under the
baseline's + 1.5 GB; A's disk never past its quota. Last, B alone again, for how far
the machine itself drifted meanwhile (not judged).

A's disk is judged on what it holds: the peak of what three samples in a row (0.2 s)
all measured. The instant peak is printed too. They differ by what a run of A's code
writes between two of the sandbox's measures of its workspace (every 10 ms near its
limit): on disk until the run is stopped and its files deleted, a few tens of ms later.
What the server writes for A (snapshots, restores, spill) is counted before it is
written, so it shows in both (backend/tools/sandbox/room.py says why a run's own writes
are measured, not refused: refusing them needs a filesystem quota, root only).

    .venv/bin/python -m benchmarks.noisy_neighbour [--rounds 40] [--seconds 20] [--paths PATH ...]

`--smoke`: a 200k-row table, small files, two rounds of B per phase, to check that it runs
(`make test` does): it judges no goal, and fails when one of B's requests does, or when A
gets an answer of 500 or more other than a 503 or a 507 (its quota).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import zlib
from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from multiprocessing.synchronize import Event as ProcessEvent
from pathlib import Path
from typing import Any

import duckdb
import httpx

from tests.conftest import scripted_server
from tests.support.live_server import LiveServer

CONCURRENCY = 50  # A's requests in each wave
RSS_BOUND_MB = 1536  # the server's RSS may grow this much over the baseline's
P50_GOAL, P99_GOAL = 2.0, 5.0
BIG, WIDE, SMALL = "0123456789ab_1", "0123456789ab_2", "0123456789ab_1"
A_TABLES, A_EXPORT, B_TABLES, B_CODE = "a-tables", "a-tables", "b-tables", "b-code"
CHAT_TAG, DISK_TAG = "NOISY-CHAT", "NOISY-DISK"
TOKEN_DELAY = 0.05  # seconds between the slow reply's words
MB = 1024 * 1024


@dataclass(frozen=True)
class Sizes:
    rows: int  # the big table
    wide_rows: int  # the table downloaded as XLSX (at most 1,048,575)
    upload_mb: int  # the upload an export hashes
    turn_mb: int  # fresh data a snapshot turn writes
    links: int  # names it gives that data
    sparse_mb: int  # the hole it makes
    quota_mb: int  # A's max_disk_mb
    words: int  # the slow chat reply
    rounds: int  # B's rounds per phase, at least
    seconds: float  # and for at least this long


FULL = Sizes(20_000_000, 1_000_000, 200, 100, 50, 1024, 1500, 200, 40, 20.0)
SMOKE = Sizes(200_000, 5_000, 2, 2, 5, 16, 100, 10, 2, 0.0)

DISK_CODE = """from pathlib import Path
import numpy as np
Path("outputs/copies").mkdir(parents=True, exist_ok=True)
data = Path("outputs/data.bin")
data.write_bytes(np.random.default_rng().bytes({turn_mb} * 1024 * 1024))
for number in range(1, {links}):
    Path(f"outputs/copies/{{number}}.bin").hardlink_to(data)
with open("outputs/sparse.bin", "wb") as handle:
    handle.truncate({sparse_mb} * 1024 * 1024)
print("names", data.stat().st_nlink)
"""


def replies(sizes: Sizes) -> list[dict[str, Any]]:
    code = DISK_CODE.format(turn_mb=sizes.turn_mb, links=sizes.links, sparse_mb=sizes.sparse_mb)
    slow = " ".join(f"word{number}" for number in range(sizes.words))
    return [
        {"when": CHAT_TAG, "content": slow, "token_delay": TOKEN_DELAY, "repeat": True},
        {"when": "[stage: review]", "content": '{"answers_question": true}', "repeat": True},
        {
            "when": ["[stage: react]", DISK_TAG],
            "content": f"Action: coder\nAction Input: {DISK_TAG}",
            "repeat": True,
        },
        {
            "when": ["[stage: generate]", DISK_TAG],
            "content": f"```python\n{code}```",
            "repeat": True,
        },
        {"when": ["[stage: answer]", DISK_TAG], "content": "Written.", "repeat": True},
    ]


# ---------------------------------------------------------------- the users and their data


def person(server: LiveServer, name: str, **limits: int) -> tuple[int, str]:
    """A user made by the admin (with `limits`, if any): their id and token."""
    password = f"{name}-password-1"
    with server.client() as admin:
        made = admin.post("/api/users", json={"username": name, "password": password})
        made.raise_for_status()
        user_id = int(made.json()["id"])
        if limits:
            admin.patch(f"/api/users/{user_id}", json={"limits": limits}).raise_for_status()
    return user_id, server.token(name, password)


def workspace(server: LiveServer, user_id: int, token: str, session: str) -> Path:
    """A session of the user's (made by an upload), and its folder."""
    with server.client(token) as http:
        made = http.post(
            "/api/upload", data={"session_id": session}, files={"file": ("a.csv", b"a\n1\n")}
        )
    made.raise_for_status()
    return server.data_dir / "scratch" / f"u{user_id}-{session}"


def write_table(folder: Path, table: str, rows: int) -> int:
    """A table file where a run's code would write it; its size in bytes."""
    path = folder / "outputs" / ".tables" / f"{table}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    duckdb.execute(
        f"COPY (SELECT range AS id, 'city-' || (range * 7919 % 997) AS city, "
        f"range * 31 % 1000 AS k FROM range({rows})) TO '{path}' (FORMAT parquet)"
    )
    return path.stat().st_size


def seed(server: LiveServer, sizes: Sizes) -> tuple[int, str, str]:
    """A (id, token) with the big tables and upload, and B's token with its small table."""
    a_id, a_token = person(server, "neighbour-a", max_disk_mb=sizes.quota_mb)
    b_id, b_token = person(server, "neighbour-b")
    tables = workspace(server, a_id, a_token, A_TABLES)
    big = write_table(tables, BIG, sizes.rows)
    wide = write_table(tables, WIDE, sizes.wide_rows)
    upload = tables / "uploads" / "big.bin"
    upload.write_bytes(os.urandom(sizes.upload_mb * MB))
    small = write_table(workspace(server, b_id, b_token, B_TABLES), SMALL, 1000)
    print(f"A's tables: {sizes.rows:,} rows in {big / MB:.1f} MB of Parquet, "
          f"{sizes.wide_rows:,} rows in {wide / MB:.1f} MB; its upload {sizes.upload_mb} MB; "
          f"B's table: 1,000 rows in {small / 1024:.1f} KiB")  # fmt: skip
    return a_id, a_token, b_token


# ---------------------------------------------------------------- A: waves of 50


def a_request(path: str, sizes: Sizes) -> Callable[[httpx.AsyncClient, str], Awaitable[str]]:
    """One of A's requests on `path`, given a name unique to it; its answer's label."""
    table = f"/api/sessions/{A_TABLES}/tables"

    async def page(http: httpx.AsyncClient, name: str) -> str:
        offset = sizes.rows // 2 + zlib.crc32(name.encode()) % (sizes.rows // 4)
        params: dict[str, str | int] = {
            "offset": offset,
            "limit": 50,
            "sort": "city",
            "order": "desc",
        }
        return str((await http.get(f"{table}/{BIG}/rows", params=params)).status_code)

    async def download(http: httpx.AsyncClient, url: str, format: str) -> str:
        async with http.stream("GET", url, params={"format": format}) as reply:
            async for _ in reply.aiter_bytes():
                pass
            return str(reply.status_code)

    async def csv(http: httpx.AsyncClient, name: str) -> str:
        return await download(http, f"{table}/{BIG}/download", "csv")

    async def xlsx(http: httpx.AsyncClient, name: str) -> str:
        return await download(http, f"{table}/{WIDE}/download", "xlsx")

    async def chat(http: httpx.AsyncClient, name: str, tag: str, agent: str) -> str:
        body = {"message": f"{tag} {name}", "session_id": name, "agent_type": agent,
                "stream": True}  # fmt: skip
        async with http.stream("POST", "/api/chat", json=body) as reply:
            failed = False
            async for line in reply.aiter_lines():
                failed = failed or line == "event: error"
            return f"{reply.status_code}{' (error event)' if failed else ''}"

    async def snapshot(http: httpx.AsyncClient, name: str) -> str:
        return await chat(http, name, DISK_TAG, "react")

    async def stream(http: httpx.AsyncClient, name: str) -> str:
        return await chat(http, name, CHAT_TAG, "chat")

    async def export(http: httpx.AsyncClient, name: str) -> str:
        return str((await http.get(f"/api/sessions/{A_EXPORT}/export")).status_code)

    return {"table pages": page, "CSV downloads": csv, "XLSX downloads": xlsx,
            "snapshots": snapshot, "exports": export, "chat streams": stream}[path]  # fmt: skip


async def hammer(
    url: str, token: str, path: str, sizes: Sizes, signals: tuple[ProcessEvent, ...]
) -> Counter[str]:
    """Waves of CONCURRENCY requests on `path` until `stop`; A's answers by label. Sets
    `started` at A's first answer (the rest of its wave then holds its places) and `waved`
    when the first wave has ended."""
    started, waved, stop = signals
    answers: Counter[str] = Counter()
    request = a_request(path, sizes)
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=900, limits=limits) as http:

        async def one(name: str) -> None:
            try:
                answers[await request(http, name)] += 1
            except asyncio.CancelledError:
                answers["cut at the phase's end"] += 1
                raise
            except httpx.HTTPError as exc:
                answers[type(exc).__name__] += 1
            started.set()

        async def waves() -> None:
            wave = 0
            while True:
                tag = f"a-{path.split()[0].lower()}-{wave}"
                await asyncio.gather(*(one(f"{tag}-{i}") for i in range(CONCURRENCY)))
                waved.set()
                wave += 1

        going = asyncio.create_task(waves())
        await asyncio.to_thread(stop.wait)
        going.cancel()
        await asyncio.gather(going, return_exceptions=True)
    return answers


def hammer_process(
    url: str,
    token: str,
    path: str,
    sizes: Sizes,
    signals: tuple[ProcessEvent, ...],
    results: Any,
) -> None:
    answers = dict(asyncio.run(hammer(url, token, path, sizes, signals)))
    results.put((answers, time.process_time()))


# ---------------------------------------------------------------- B: ordinary work


@dataclass
class Timings:
    by_kind: dict[str, list[float]] = field(default_factory=dict)

    def add(self, kind: str, seconds: float) -> None:
        self.by_kind.setdefault(kind, []).append(seconds)

    @property
    def all(self) -> list[float]:
        return [time for times in self.by_kind.values() for time in times]


def b_work(url: str, token: str, sizes: Sizes, until: ProcessEvent | None = None) -> Timings:
    """B's rounds (at least `rounds`, for at least `seconds`, and until `until` is set),
    each request timed; raises when one fails."""
    timings = Timings()
    page = f"/api/sessions/{B_TABLES}/tables/{SMALL}/rows"
    code = {"session_id": B_CODE, "code": "print(sum(range(1000)))"}
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=300) as http:

        def timed(kind: str, send: Callable[[], httpx.Response]) -> None:
            started = time.perf_counter()
            reply = send()
            timings.add(kind, time.perf_counter() - started)
            if reply.status_code != 200:
                raise RuntimeError(f"B's {kind}: {reply.status_code} {reply.text[:300]}")
            if kind == "python_coder run" and reply.json()["data"]["stdout"] != "499500\n":
                raise RuntimeError(f"B's run printed {reply.json()['data']}")

        deadline = time.monotonic() + sizes.seconds
        rounds = 0
        while (
            rounds < sizes.rounds
            or time.monotonic() < deadline
            or (until is not None and not until.is_set())
        ):
            timed("list conversations", lambda: http.get("/api/conversations"))
            timed("table page", lambda: http.get(page, params={"offset": 500, "limit": 50}))
            timed("python_coder run", lambda: http.post("/api/tools/python_coder", json=code))
            rounds += 1
    return timings


# ---------------------------------------------------------------- what the server holds


def allocated(folders: list[Path]) -> int:
    """Bytes the files under `folders` take on disk, each inode once."""
    inodes: dict[tuple[int, int], int] = {}
    for folder in folders:
        for root, _, names in os.walk(folder):
            for name in names:
                try:
                    info = os.lstat(os.path.join(root, name))
                except FileNotFoundError:
                    continue  # removed meanwhile
                inodes[(info.st_dev, info.st_ino)] = info.st_blocks * 512
    return sum(inodes.values())


def cpu_seconds(pid: int) -> float:
    """The process's CPU time so far (user and system; not its children's)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Peaks:
    rss_mb: float = 0.0
    disk_mb: float = 0.0  # A's workspaces and snapshots, at an instant
    held_mb: float = 0.0  # ... and what three samples in a row (0.2 s) all measured
    spill_mb: float = 0.0  # DuckDB's, under DATA_DIR
    server_cpu: float = 0.0  # the server process's CPU seconds over the phase


class Sampler:
    """The server's RSS and A's disk every 0.1 s, at their peaks, while on: in
    a process of its own, so that walking A's files never takes the GIL from B's client."""

    def __init__(self, server: LiveServer, a_id: int) -> None:
        assert server.process is not None
        self.pid = server.process.pid
        self.data = server.data_dir
        self.a_id = a_id
        self.peaks = Peaks()
        context = multiprocessing.get_context("spawn")
        self._done = context.Event()
        self._results = context.Queue()
        self._process = context.Process(
            target=_sample, args=(self.pid, self.data, a_id, self._done, self._results)
        )

    def __enter__(self) -> Peaks:
        self._cpu = cpu_seconds(self.pid)
        self._process.start()
        return self.peaks

    def __exit__(self, *_: object) -> None:
        self._done.set()
        found: Peaks = self._results.get(timeout=300)
        self._process.join()
        self.peaks.rss_mb, self.peaks.disk_mb = found.rss_mb, found.disk_mb
        self.peaks.held_mb = found.held_mb
        self.peaks.spill_mb = found.spill_mb
        self.peaks.server_cpu = cpu_seconds(self.pid) - self._cpu


def _sample(pid: int, data: Path, a_id: int, done: ProcessEvent, results: Any) -> None:
    peaks = Peaks()
    recent: deque[float] = deque(maxlen=3)  # A's disk, the latest samples

    def measure_disk() -> None:
        mine = [
            *(data / "scratch").glob(f"u{a_id}-*"),
            *(data / "snapshots").glob(f"u{a_id}-*"),
        ]
        recent.append(allocated(mine) / MB)
        peaks.disk_mb = max(peaks.disk_mb, recent[-1])
        if len(recent) == recent.maxlen:
            peaks.held_mb = max(peaks.held_mb, min(recent))
        peaks.spill_mb = max(peaks.spill_mb, allocated([data / "tmp"]) / MB)

    while True:
        peaks.rss_mb = max(peaks.rss_mb, rss_mb(pid))
        measure_disk()
        if done.wait(0.1):
            break
    measure_disk()
    peaks.held_mb = max(peaks.held_mb, min(recent))  # a phase of fewer samples
    results.put(peaks)


# ---------------------------------------------------------------- phases and the report


def percentile(times: list[float], share: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


@dataclass
class Phase:
    name: str
    timings: Timings
    peaks: Peaks
    answers: dict[str, int]
    seconds: float
    a_cpu: float  # A's client process's CPU seconds
    b_cpu: float  # B's client's (and the sampler's: this process)

    @property
    def p50(self) -> float:
        return statistics.median(self.timings.all)

    @property
    def p99(self) -> float:
        return percentile(self.timings.all, 0.99)


def run_phase(
    server: LiveServer, a: tuple[int, str], b_token: str, path: str | None, sizes: Sizes
) -> Phase:
    """B's rounds, alone (`path` None) or while A hammers `path` from another process."""
    a_id, a_token = a
    context = multiprocessing.get_context("spawn")
    started, waved, stop = context.Event(), context.Event(), context.Event()
    results = context.Queue()
    hammering = None
    if path is not None:
        hammering = context.Process(
            target=hammer_process,
            args=(server.url, a_token, path, sizes, (started, waved, stop), results),
        )
        hammering.start()
        if not started.wait(300):
            raise RuntimeError(f"A's {path} got no answer in 300 s; see {server.log_path}")
    begun, own_cpu = time.perf_counter(), time.process_time()
    with Sampler(server, a_id) as peaks:
        try:
            timings = b_work(server.url, b_token, sizes, waved if hammering else None)
        finally:
            stop.set()
        answers, a_cpu = results.get(timeout=300) if hammering else ({}, 0.0)
        if hammering is not None:
            hammering.join()
    b_cpu = time.process_time() - own_cpu
    seconds = time.perf_counter() - begun
    return Phase(path or "B alone", timings, peaks, answers, seconds, a_cpu, b_cpu)


def report(phase: Phase, baseline: Phase, quota_mb: int) -> None:
    ms = 1000
    by_kind = ", ".join(
        f"{kind} {statistics.median(times) * ms:.1f} ms"
        for kind, times in phase.timings.by_kind.items()
    )
    print(f"\n== {phase.name} ({phase.seconds:.1f} s, {len(phase.timings.all)} requests of B)")
    print(f"B: p50 {phase.p50 * ms:.1f} ms ({phase.p50 / baseline.p50:.2f}x), "
          f"p99 {phase.p99 * ms:.1f} ms ({phase.p99 / baseline.p99:.2f}x); "
          f"p50 by kind: {by_kind}")  # fmt: skip
    if phase.answers:
        shown = ", ".join(f"{label}: {count}" for label, count in sorted(phase.answers.items()))
        print(f"A's answers: {shown}")
    print(f"CPU seconds: the server {phase.peaks.server_cpu:.1f} (not the sandboxes), A's "
          f"client {phase.a_cpu:.1f}, B's client and the sampler {phase.b_cpu:.1f}")  # fmt: skip
    peaks = phase.peaks
    print(f"server RSS peak {peaks.rss_mb:.0f} MB; A's disk peak held {peaks.held_mb:.0f} MB "
          f"of its {quota_mb} MB quota (at an instant {peaks.disk_mb:.0f} MB); DuckDB spill "
          f"peak {peaks.spill_mb:.0f} MB")  # fmt: skip


def verdicts(phases: list[Phase], baseline: Phase, quota_mb: int, judged: bool) -> None:
    def verdict(met: bool) -> str:
        return ("PASS" if met else "MISS") if judged else "NOT JUDGED (smoke)"

    p50 = max(phases, key=lambda phase: phase.p50 / baseline.p50)
    p99 = max(phases, key=lambda phase: phase.p99 / baseline.p99)
    rss = max(phases, key=lambda phase: phase.peaks.rss_mb)
    disk = max(phases, key=lambda phase: phase.peaks.held_mb)
    instant = max(phases, key=lambda phase: phase.peaks.disk_mb)
    bound = baseline.peaks.rss_mb + RSS_BOUND_MB
    print("\n== goals")
    print(f"{verdict(p50.p50 / baseline.p50 <= P50_GOAL)}: B's p50 within {P50_GOAL:g}x: worst "
          f"{p50.p50 / baseline.p50:.2f}x ({p50.name})")  # fmt: skip
    print(f"{verdict(p99.p99 / baseline.p99 <= P99_GOAL)}: B's p99 within {P99_GOAL:g}x: worst "
          f"{p99.p99 / baseline.p99:.2f}x ({p99.name})")  # fmt: skip
    print(f"{verdict(rss.peaks.rss_mb <= bound)}: server RSS under the baseline's "
          f"{baseline.peaks.rss_mb:.0f} MB + {RSS_BOUND_MB} MB = {bound:.0f} MB: peak "
          f"{rss.peaks.rss_mb:.0f} MB ({rss.name})")  # fmt: skip
    print(f"{verdict(disk.peaks.held_mb <= quota_mb)}: A's disk never past its {quota_mb} MB "
          f"quota: peak held {disk.peaks.held_mb:.0f} MB ({disk.name}); at an instant "
          f"{instant.peaks.disk_mb:.0f} MB ({instant.name})")  # fmt: skip


PATHS = ["table pages", "CSV downloads", "XLSX downloads", "snapshots", "exports",
         "chat streams"]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=FULL.rounds)
    parser.add_argument("--seconds", type=float, default=FULL.seconds)
    parser.add_argument("--smoke", action="store_true", help="small sizes, to check it runs")
    parser.add_argument(
        "--paths", nargs="+", choices=PATHS, default=PATHS, metavar="PATH",
        help=f"only these of A's paths (default: all of {', '.join(PATHS)})",
    )  # fmt: skip
    args = parser.parse_args()
    sizes = SMOKE if args.smoke else Sizes(**{**FULL.__dict__, "rounds": args.rounds,
                                              "seconds": args.seconds})  # fmt: skip
    env = {"PYTHON_CODE_MAX_FILE_SIZE": str(max(sizes.sparse_mb, sizes.turn_mb) + 1)}
    with (
        tempfile.TemporaryDirectory() as folder,
        scripted_server(Path(folder), replies(sizes), **env) as server,
    ):
        a_id, a_token, b_token = seed(server, sizes)
        a = (a_id, a_token)
        b_work(server.url, b_token, Sizes(**{**sizes.__dict__, "rounds": 1, "seconds": 0}))
        baseline = run_phase(server, a, b_token, None, sizes)
        report(baseline, baseline, sizes.quota_mb)
        phases = []
        for path in args.paths:
            phases.append(run_phase(server, a, b_token, path, sizes))
            report(phases[-1], baseline, sizes.quota_mb)
        # B alone once more: how far the machine itself drifted over the run.
        after = run_phase(server, a, b_token, None, sizes)
        after.name = "B alone, again (the machine's drift; not judged)"
        report(after, baseline, sizes.quota_mb)
        verdicts(phases, baseline, sizes.quota_mb, judged=not args.smoke)
    broken = {
        label
        for phase in phases
        for label in phase.answers
        # 503 (the server's places) and 507 (A's disk quota) are refusals, as 429 is
        if (label[:1] == "5" and label[:3] not in ("503", "507")) or label.endswith("Error")
    }
    if broken:
        print(f"A got answers that are failures, not refusals: {sorted(broken)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
