"""How much latency does our `/v1/chat/completions` add in front of an upstream?

A scripted OpenAI-compatible upstream streams N tokens with fixed pacing on
loopback, in its own process. Each request goes to the upstream directly and
through our server (LLM_BACKEND=openai), interleaved so machine noise hits both
alike. We print the added latency at p50/p99, for the whole request and for the
first token, then run concurrent streams through the server and count errors.

The floor is a minimal Starlette + httpx pass-through proxy (benchmarks/baseline_proxy.py)
measured in the same run: what any proxy adds. A fourth path calls langchain-openai's
`ChatOpenAI` in this process: what that client alone costs (the agents use it; plain
chat streams straight from the upstream, `backend/llm/upstream.py`).

    .venv/bin/python -m benchmarks.gateway_overhead [--requests 200] [--concurrency 64] [--smoke]

`--smoke`: a few short streams on each path, to check that it runs (`make test` does).

Goals: added latency at p50 within 1.3x of the floor's, first token within 2 ms of the
floor's, and 0 errors with 64 concurrent streams in each of 3 rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
from langchain_openai import ChatOpenAI
from pydantic import SecretStr

from tests.support.live_server import ROOT, LiveServer, free_port


@dataclass
class Sample:
    total: float
    first_token: float


async def stream_once(client: httpx.AsyncClient, url: str, headers: dict[str, str]) -> Sample:
    body = {
        "model": "fake-upstream",
        "stream": True,
        "messages": [{"role": "user", "content": "benchmark"}],
    }
    started = time.perf_counter()
    first_token = 0.0
    done = False
    async with client.stream("POST", url, json=body, headers=headers) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: ") and not first_token:
                choices = json.loads(line[6:]).get("choices") or [{}]
                if choices[0].get("delta", {}).get("content"):
                    first_token = time.perf_counter() - started
    if not done:
        raise RuntimeError("stream ended without [DONE]")
    return Sample(time.perf_counter() - started, first_token)


async def langchain_once(model: ChatOpenAI) -> Sample:
    started = time.perf_counter()
    first_token = 0.0
    async for chunk in model.astream("benchmark"):
        if chunk.content and not first_token:
            first_token = time.perf_counter() - started
    return Sample(time.perf_counter() - started, first_token)


def wait_for_port(port: int, timeout: float = 30) -> None:
    """Until something accepts connections on 127.0.0.1:`port`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def report(
    label: str,
    direct: list[float],
    gateway: list[float],
    other: tuple[str, list[float]] | None = None,
    via: str = "via server",
) -> None:
    for q in (50, 99):
        d, g = percentile(direct, q), percentile(gateway, q)
        line = (
            f"  {label:<12} p{q}: direct {d * 1000:8.2f} ms   {via} {g * 1000:8.2f} ms"
            f"   added {(g - d) * 1000:+7.2f} ms   ratio {g / d:5.3f}"
        )
        if other:
            o = percentile(other[1], q)
            line += f"   | {other[0]} {o * 1000:8.2f} ms (added {(o - d) * 1000:+6.2f} ms)"
        print(line)


async def sequential(
    client: httpx.AsyncClient,
    upstream_url: str,
    proxy_url: str,
    gateway_url: str,
    token: str,
    requests: int,
    warmup: int = 10,
) -> None:
    auth = {"Authorization": f"Bearer {token}"}
    direct_url = f"{upstream_url}/chat/completions"
    langchain = ChatOpenAI(
        model="fake-upstream",
        base_url=upstream_url,
        api_key=SecretStr("unused"),
        max_retries=0,
    )
    paths: dict[str, Callable[[], Awaitable[Sample]]] = {
        "direct": lambda: stream_once(client, direct_url, {}),
        "proxy": lambda: stream_once(client, proxy_url, {}),
        "server": lambda: stream_once(client, gateway_url, auth),
        "langchain": lambda: langchain_once(langchain),
    }
    samples: dict[str, list[Sample]] = {name: [] for name in paths}
    for _ in range(warmup):  # warm up connections and caches on every path alike
        for measure_once in paths.values():
            await measure_once()
    for i in range(requests):
        order = list(paths.items())
        turn = i % len(order)
        order = order[turn:] + order[:turn]  # rotate so no path always goes first
        for name, measure_once in order:
            samples[name].append(await measure_once())
    print(f"Sequential streams: {requests} on each path")
    for label, field in (("request", "total"), ("first token", "first_token")):
        direct, proxy, server, chat_openai = (
            [getattr(sample, field) for sample in samples[name]]
            for name in ("direct", "proxy", "server", "langchain")
        )
        report(label, direct, server, ("ChatOpenAI in-process", chat_openai))
        report(label, direct, proxy, None, via="via floor ")
        floor = percentile(proxy, 50) - percentile(direct, 50)
        ours = percentile(server, 50) - percentile(direct, 50)
        print(
            f"  {label:<12} p50 added: server {ours * 1000:+.2f} ms, floor {floor * 1000:+.2f} ms,"
            f" ratio {ours / floor if floor > 0 else float('nan'):.2f}x,"
            f" difference {(ours - floor) * 1000:+.2f} ms"
        )


async def concurrent(
    client: httpx.AsyncClient,
    url: str,
    headers: dict[str, str],
    streams: int,
    rounds: int,
) -> tuple[list[float], int]:
    async def one() -> float | None:
        try:
            return (await stream_once(client, url, headers)).total
        except (httpx.HTTPError, RuntimeError):
            return None

    totals: list[float] = []
    errors = 0
    for _ in range(rounds):
        results = await asyncio.gather(*(one() for _ in range(streams)))
        totals += [r for r in results if r is not None]
        errors += sum(r is None for r in results)
    return totals, errors


async def measure(
    args: argparse.Namespace, upstream_url: str, proxy_url: str, server: LiveServer
) -> int:
    """Prints the figures; the number of failed streams."""
    token = server.token()
    limits = httpx.Limits(max_connections=args.concurrency * 2)
    async with httpx.AsyncClient(timeout=60, limits=limits) as client:
        direct_url = f"{upstream_url}/chat/completions"
        gateway_url = f"{server.url}/v1/chat/completions"
        print(
            f"Upstream: {args.tokens} tokens, {args.delay_ms:g} ms apart "
            f"(ideal {args.tokens * args.delay_ms:g} ms per request)"
        )
        proxied_url = f"{proxy_url}/chat/completions"
        await sequential(
            client, upstream_url, proxied_url, gateway_url, token, args.requests, args.warmup
        )

        print(f"Concurrent streams: {args.concurrency} at once, {args.rounds} rounds")
        auth = {"Authorization": f"Bearer {token}"}
        direct, direct_errors = await concurrent(
            client, direct_url, {}, args.concurrency, args.rounds
        )
        proxied, proxy_errors = await concurrent(
            client, proxied_url, {}, args.concurrency, args.rounds
        )
        gateway, errors = await concurrent(client, gateway_url, auth, args.concurrency, args.rounds)
        print(f"  errors: direct {direct_errors}, via floor {proxy_errors}, via server {errors}")
        report("request", direct, gateway)
        report("request", direct, proxied, via="via floor ")
        added = statistics.median(gateway) - statistics.median(direct)
        print(f"  median added per stream under load: {added * 1000:+.2f} ms")
    return direct_errors + proxy_errors + errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--delay-ms", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=10, help="untimed requests on each path")
    parser.add_argument("--smoke", action="store_true", help="a few streams, to check it runs")
    args = parser.parse_args()
    if args.smoke:
        args.requests, args.tokens, args.delay_ms = 3, 3, 1.0
        args.concurrency, args.rounds, args.warmup = 4, 1, 1

    upstream_port = free_port()
    upstream = subprocess.Popen(
        [sys.executable, "-m", "tests.support.fake_openai", "--port", str(upstream_port),
         "--tokens", str(args.tokens), "--delay-ms", str(args.delay_ms)],
        cwd=ROOT,
    )  # fmt: skip
    upstream_url = f"http://127.0.0.1:{upstream_port}/v1"
    proxy_port = free_port()
    proxy = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.baseline_proxy", "--port", str(proxy_port),
         "--upstream", upstream_url],
        cwd=ROOT,
    )  # fmt: skip
    proxy_url = f"http://127.0.0.1:{proxy_port}/v1"
    with tempfile.TemporaryDirectory() as tmp:
        server = LiveServer(
            Path(tmp) / "data",
            LLM_BACKEND="openai",
            OPENAI_BASE_URL=upstream_url,
            OPENAI_MODEL="fake-upstream",
            MODEL_PROBE="false",  # the stand-in answers every call alike
            ADMIN_PASSWORD="benchmark-password",
            LOG_LEVEL="WARNING",
        )
        try:
            server.start()
            wait_for_port(upstream_port)
            wait_for_port(proxy_port)
            errors = asyncio.run(measure(args, upstream_url, proxy_url, server))
        finally:
            server.stop()
            for process in (proxy, upstream):
                process.terminate()
                process.wait(timeout=10)
    if args.smoke and errors:
        sys.exit(f"--smoke: {errors} stream(s) failed")


if __name__ == "__main__":
    main()
