"""How often does a model answer data questions right, through the evaluation API?

The project's starter set (`POST /api/evals/sets/starter`: 39 questions of seven types,
aggregate, multi-step, join, dates, dirty, excel and large, over files it generates,
with known answers) is asked through `POST /api/evals/runs` with the chosen agent type,
and the run is followed with `GET /api/evals/runs/{id}` until it ends. The server
scores each answer (its `@name[value]` pairs against the expected values, DABench's
way) and counts each question's model calls, tokens and seconds; this prints the
per-question table, the score per type with those means, the total score with its 95%
Wilson interval, the wall time and the machine's cores.

By default it starts its own server on the embedded model (SmolLM2-135M, llama.cpp
with --threads threads); `--ollama-url URL --model NAME` starts one on an Ollama
server, `--openai-url URL --model NAME` on an OpenAI-compatible one (its key from
OPENAI_API_KEY, if set), and `--server URL --token T` uses a running server.
`--limit N` stops the run after N questions (the API asks a whole set, so the run is
cancelled then; the question the cancel cut off is not scored).

    .venv/bin/python -m benchmarks.answer_quality [--agent-type auto] [--limit N]
        [--threads 1] [--ollama-url URL --model NAME | --openai-url URL --model NAME
        | --server URL --token T] [--keep] [--smoke]

`--smoke`: the scripted model and `--limit 2`, to check that the benchmark, the server
and the evaluation API run end to end (`make test` does); it fails unless the run ends
with at least 2 results.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from backend.evals.report import run_table
from benchmarks.coder_small_model import benchmark_server, clean_up
from benchmarks.dabench_runner import SMOKE_REPLIES
from tests.support.live_server import LiveServer

AGENT_TYPES = ("auto", "react", "plan_execute", "chat")
ENDED = ("completed", "cancelled", "failed", "interrupted")
POLL = 0.5  # seconds between looks at the run
HTTP_TIMEOUT = 120.0  # seconds for one API call (the run itself goes on in the server)


def check(response: httpx.Response) -> Any:
    if not response.is_success:
        raise SystemExit(
            f"{response.request.method} {response.request.url.path}: "
            f"HTTP {response.status_code} {response.text[:300]}"
        )
    return response.json()


def starter_set(client: httpx.Client) -> str:
    """The user's starter set, added if there is none (writing its files takes a while)."""
    sets = check(client.get("/api/evals/sets"))
    mine = next((s for s in sets if s["source"] == "starter"), None)
    if mine is None:
        started = time.perf_counter()
        mine = check(client.post("/api/evals/sets/starter"))
        print(f"starter set added in {time.perf_counter() - started:.1f} s", flush=True)
    print(f"set {mine['id']}: {mine['question_count']} questions {mine['kinds']}", flush=True)
    return str(mine["id"])


def follow(client: httpx.Client, run_id: str, limit: int | None) -> dict[str, Any]:
    """Poll the run until it ends, printing its progress; cancel it after `limit` results."""
    started, shown = time.perf_counter(), None
    while True:
        run: dict[str, Any] = check(client.get(f"/api/evals/runs/{run_id}"))
        state = (run["status"], run["done"], run.get("current"))
        if state != shown:
            shown = state
            score = run["score"]
            asking = f", asking {run['current']}" if run.get("current") else ""
            print(
                f"  [{time.perf_counter() - started:7.1f} s] {run['status']}: "
                f"{run['done']}/{run['total']} done, {score['right']} right{asking}",
                flush=True,
            )
        if run["status"] in ENDED:
            return run
        if limit is not None and run["done"] >= limit:
            print(f"  --limit {limit}: cancelling the run", flush=True)
            check(client.post(f"/api/evals/runs/{run_id}/cancel"))
            return dict(check(client.get(f"/api/evals/runs/{run_id}")))
        time.sleep(POLL)


def answered(run: dict[str, Any]) -> dict[str, Any]:
    """The run with only the questions it answered: one the cancel cut off is `stopped`,
    and the API already leaves it out of the score."""
    return {**run, "results": [r for r in run["results"] if not r["stopped"]]}


def measure(client: httpx.Client, args: argparse.Namespace) -> dict[str, Any]:
    set_id = starter_set(client)
    body = {"set_id": set_id, "model": args.model, "agent_type": args.agent_type}
    run = check(client.post("/api/evals/runs", json=body))
    print(f"run {run['id']}: {run['total']} questions on {run['model']} ({args.agent_type})")
    try:
        finished = follow(client, run["id"], args.limit)
    except KeyboardInterrupt:
        check(client.post(f"/api/evals/runs/{run['id']}/cancel"))
        finished = check(client.get(f"/api/evals/runs/{run['id']}"))
    return answered(finished)


def configured(args: argparse.Namespace, root: Path) -> LiveServer:
    """The server to start (not started yet), on the backend the flags name."""
    if args.smoke:
        server = benchmark_server(root, "scripted", args.threads)
        (root / "replies.json").write_text(json.dumps(SMOKE_REPLIES))
        server.env["SCRIPTED_REPLIES"] = str(root / "replies.json")
    elif args.ollama_url:
        server = benchmark_server(root, "ollama", args.threads)
        server.env.update(OLLAMA_HOST=args.ollama_url, OLLAMA_MODEL=args.model)
    elif args.openai_url:
        server = benchmark_server(root, "openai", args.threads)
        # The server is started without the caller's OPENAI_* variables: pass them on.
        server.env.update(OPENAI_BASE_URL=args.openai_url, OPENAI_MODEL=args.model)
        server.env["OPENAI_API_KEY"] = os.environ.get("OPENAI_API_KEY", "")
    else:
        server = benchmark_server(root, "embedded", args.threads)
    return server


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent-type", choices=AGENT_TYPES, default="auto")
    parser.add_argument("--limit", type=int, help="stop after the first N questions")
    parser.add_argument("--model", default="", help="the model (default: the server's)")
    upstream = parser.add_mutually_exclusive_group()
    upstream.add_argument("--ollama-url", help="start the server on this Ollama (needs --model)")
    upstream.add_argument(
        "--openai-url", help="start the server on this OpenAI-compatible /v1 (needs --model)"
    )
    upstream.add_argument("--server", help="use this running server instead of starting one")
    parser.add_argument("--token", help="bearer token (or API key) for --server")
    parser.add_argument(
        "--threads", type=int, default=1, help="EMBEDDED_THREADS for the server (0: all cores)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the started server's data")
    parser.add_argument("--smoke", action="store_true", help="two scripted questions, to check")
    args = parser.parse_args()
    if args.smoke:
        if args.server or args.ollama_url or args.openai_url:
            parser.error("--smoke starts its own server on the scripted model")
        args.limit = 2
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    if (args.ollama_url or args.openai_url) and not args.model:
        parser.error("--ollama-url and --openai-url need --model")
    if args.server and not args.token:
        parser.error("--server needs --token")
    return args


def main() -> None:
    args = parse()
    started = time.perf_counter()
    if args.server:
        headers = {"Authorization": f"Bearer {args.token}"}
        with httpx.Client(base_url=args.server, headers=headers, timeout=HTTP_TIMEOUT) as client:
            run = measure(client, args)
        where = f"server {args.server}"
    else:
        root = Path(tempfile.mkdtemp(prefix="answer-quality-"))
        server = configured(args, root)
        try:
            server.start()
            print(f"backend: {server.env['LLM_BACKEND']} (EMBEDDED_THREADS={args.threads})")
            with server.client(timeout=HTTP_TIMEOUT) as client:
                run = measure(client, args)
        finally:
            server.stop()
            clean_up(root, server, args.keep)
        where = f"a server started here ({server.env['LLM_BACKEND']})"
    wall = time.perf_counter() - started
    print()
    print(run_table(run))
    failed = [r["question_id"] for r in run["results"] if r["error"]]
    print(f"questions that ended in an error: {len(failed)}", *failed)
    if args.limit is not None:
        print(f"--limit {args.limit}: {len(run['results'])} of {run['total']} questions reported")
    print(f"wall time: {wall:.1f} s on {where}; machine: {os.cpu_count()} cores")
    count = len(run["results"])
    enough = count >= min(args.limit or run["total"], run["total"])
    if args.smoke and not enough:
        raise SystemExit(f"--smoke: the run ended {run['status']} with {count} results")
    if not enough or run["status"] in ("failed", "interrupted"):
        sys.exit(1)


if __name__ == "__main__":
    main()
