"""What does a turn cost on a local model, before and after a change to the agents?

A simulated llama.cpp server (benchmarks/simulated_llamacpp.py) stands in for the
model: the server under test reaches it as `LLM_BACKEND=openai`, and it answers
from a script (benchmarks/local_llm_scenarios.py) while it records each call's
prompt tokens, prompt tokens served from its cached prefix, and generated tokens.
Nothing sleeps: two profiles turn the same record into seconds, a 7-8B Q4 model on
a consumer GPU (prompt 1500 tokens/s, generation 40 tokens/s) and the same model
on a laptop's CPU (60 and 8).

Ten turns (one-step and three-step questions over the DABench sample's tables,
and a session of a question and two follow-ups) go to `POST /api/chat` with each
agent (`react`, `plan_execute`), each question in a fresh session holding its CSV;
the code really runs in the sandbox. The slots' caches start cold for each agent.

The floor is function calling with the same simulated model, measured in the same
run by this script itself: call 1 is a short system prompt with the file's columns
and the question, with a `python` tool, to which the model replies with the same
code it writes in `generate`; call 2 adds the tool's result (what the server's own
run printed) and gets the same answer the model writes in `answer`. A follow-up
continues its session's conversation.

`--before REV` (default 818de1f, the tree before this work) runs the same turns
against a server started from a `git worktree` of REV (same .venv), then against
the working tree, and prints both with their ratios; `--only after` (or `before`)
runs one. The tables, the goals' PASS/FAIL lines and any notes are printed by
benchmarks/local_llm_report.py; every call also goes to a JSON trace (`--trace`).
Goals, checked on each tree:

- a one-step question takes at most 4 model calls with the code review, 3 when its
  code is trivial (at most 3 top-level statements), and its GPU time is within
  1.5x of the floor's;
- a three-step plan (plan_execute) takes at most 8 calls, and writes no answer
  that a later call rewrites;
- at least 60% of the 3-turn session's prompt tokens come from the cached prefix;
- the tokens generated for answers (`answer`, `final`, ReAct's Final Answer) are
  at least 40% fewer than before (needs both trees).

    .venv/bin/python -m benchmarks.local_llm_cost [--before REV] [--only after]
        [--slots 1] [--timeout 300] [--keep] [--trace PATH] [--smoke]

`--smoke`: the working tree only, the first question with each agent, to check that it
runs (`make test` does); the goals are printed but not judged, and a turn that fails
fails the run.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any
from unittest import mock

import httpx

from benchmarks.coder_small_model import PASSWORD, clean_up, default_trace, new_session
from benchmarks.dabench_runner import SAMPLE
from benchmarks.local_llm_report import AGENTS, TreeRun, Turn, print_report
from benchmarks.local_llm_scenarios import SCENARIOS, reply
from benchmarks.simulated_llamacpp import MODEL, SimulatedServer
from tests.support import live_server
from tests.support.agent_script import sse_events
from tests.support.live_server import ROOT, LiveServer

BEFORE = "818de1f"
FLOOR_SYSTEM = (
    "You are a data analyst. Answer questions about the data with the python tool: it runs "
    "your code with the data loaded as the pandas DataFrame df1 and returns what it printed.\n"
    "Columns of {file}: {columns}"
)
PYTHON_TOOL = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Runs Python with the data loaded as df1; returns what it printed.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string"}},
            "required": ["code"],
        },
    },
}


class TreeServer(LiveServer):
    """The live server started from another checkout of the repository (same .venv)."""

    def __init__(self, tree: Path, data_dir: Path, **env: str) -> None:
        super().__init__(data_dir, PYTHONPATH=str(tree), **env)
        self.tree = tree
        self.cwd = tree  # where LiveServer starts it (and ROOT, patched below, for older ones)

    def start(self, timeout: float = 120) -> LiveServer:
        with mock.patch.object(live_server, "ROOT", self.tree):  # its cwd: run_backend.py
            return super().start(timeout)


@contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """A detached `git worktree` of `rev` in a temporary folder, removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="local-llm-cost-tree-"))
    tree = folder / "tree"
    git = ["git", "-C", str(ROOT), "worktree"]
    subprocess.run([*git, "add", "--detach", "--quiet", str(tree), rev], check=True)
    try:
        yield tree
    finally:
        subprocess.run([*git, "remove", "--force", str(tree)], check=False)
        subprocess.run([*git, "prune"], check=False)
        shutil.rmtree(folder, ignore_errors=True)


def ask(client: httpx.Client, session_id: str, turn: Turn) -> None:
    body = {
        "message": turn.scenario.question,
        "session_id": session_id,
        "agent_type": turn.agent,
        "stream": True,
    }
    try:
        with client.stream("POST", "/api/chat", json=body) as response:
            if response.status_code != 200:
                turn.error = f"HTTP {response.status_code}: {response.read().decode()[:200]}"
                return
            for name, data in sse_events(response.iter_lines()):
                if name == "execution" and data.get("ok"):
                    turn.outputs.append(str(data.get("stdout", "")))
                elif name == "final":
                    turn.answer = str(data.get("text", ""))
                    turn.server_calls = data.get("llm_calls")
                elif name == "error":
                    turn.error = str(data.get("message", "error"))
    except (httpx.HTTPError, OSError, ValueError, AssertionError) as exc:  # and bad SSE
        turn.error = f"{type(exc).__name__}: {exc}"


def run_tree(run: TreeRun, tree: Path, upstream: SimulatedServer, args: argparse.Namespace) -> None:
    """Every turn with each agent, against a server started from `tree`."""
    root = Path(tempfile.mkdtemp(prefix=f"local-llm-cost-{run.name}-"))
    server = TreeServer(
        tree,
        root / "data",
        LLM_BACKEND="openai",
        OPENAI_BASE_URL=upstream.url,
        OPENAI_MODEL=MODEL,
        MODEL_PROBE="false",  # the simulated server stands in for a capable model
        ADMIN_PASSWORD=PASSWORD,
        LOG_LEVEL="WARNING",
    )
    try:
        server.start()
        with server.client(timeout=args.timeout) as client:
            for agent in AGENTS:
                upstream.sim.reset()
                sessions: dict[str, str] = {}
                for scenario in args.scenarios:
                    turn = Turn(scenario, agent)
                    run.turns[(agent, scenario.key)] = turn
                    started = time.perf_counter()
                    try:
                        session = sessions.get(scenario.follows) or new_session(
                            client, args.tables, scenario.file, f"cost-{agent}-{scenario.key}"
                        )
                    except httpx.HTTPError as exc:
                        turn.error = f"upload failed: {exc}"
                        continue
                    sessions[scenario.key] = session
                    upstream.sim.label = f"{run.name}/{agent}/{scenario.key}"
                    ask(client, session, turn)
                    turn.calls = [c for c in upstream.sim.calls if c.label == upstream.sim.label]
                    state = f"error: {turn.error[:80]}" if turn.error else "answered"
                    print(
                        f"  {run.name} {agent:<12} {scenario.key:<16} {len(turn.calls):>2} calls, "
                        f"{time.perf_counter() - started:5.1f} s wall, {state}",
                        flush=True,
                    )
    except RuntimeError as exc:  # the server did not start
        run.error = str(exc).splitlines()[0][:300]
        print(f"  {run.name}: {run.error}", flush=True)
    finally:
        server.stop()
        upstream.sim.label = ""
        clean_up(root, server, args.keep)


def columns(path: Path) -> str:
    with path.open(newline="", encoding="utf-8", errors="replace") as handle:
        header = next(csv.reader(handle), [])
    return ", ".join(name.strip() for name in header if name.strip())


def run_floor(floor: SimulatedServer, outputs: dict[str, str], tables: Path) -> dict[str, Turn]:
    """The two-call function-calling floor for each turn whose printed output we have."""
    turns: dict[str, Turn] = {}
    conversations: dict[str, list[dict[str, Any]]] = {}
    floor.sim.reset()
    with httpx.Client(base_url=floor.url, timeout=30) as client:
        for scenario in SCENARIOS:
            if scenario.key not in outputs:
                continue
            system = FLOOR_SYSTEM.format(
                file=scenario.file, columns=columns(tables / scenario.file)
            )
            messages = list(conversations.get(scenario.follows, []))
            messages = messages or [{"role": "system", "content": system}]
            messages.append({"role": "user", "content": scenario.question})
            floor.sim.label = scenario.key
            body = {"model": MODEL, "messages": messages, "tools": [PYTHON_TOOL]}
            called = client.post("/chat/completions", json=body).raise_for_status().json()
            message = called["choices"][0]["message"]
            code = json.loads(message["tool_calls"][0]["function"]["arguments"])["code"]
            if code != scenario.code:
                raise RuntimeError(f"the floor's code for {scenario.key} is not the scenario's")
            messages.append(message)
            result = {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"]}
            messages.append({**result, "content": outputs[scenario.key]})
            body = {"model": MODEL, "messages": messages, "tools": [PYTHON_TOOL]}
            answered = client.post("/chat/completions", json=body).raise_for_status().json()
            messages.append(answered["choices"][0]["message"])
            conversations[scenario.key] = messages
            turn = Turn(scenario, "floor")
            turn.calls = [c for c in floor.sim.calls if c.label == scenario.key]
            turns[scenario.key] = turn
    return turns


def printed_outputs(runs: list[TreeRun]) -> dict[str, str]:
    """What the server's runs printed for each turn, from the latest tree that has it."""
    found: dict[str, str] = {}
    for run in runs:  # later trees win, and react over plan_execute
        for (_, key), turn in sorted(run.turns.items()):
            if turn.outputs and not turn.error:
                found[key] = "".join(turn.outputs)
    return found


def write_trace(path: Path, runs: list[TreeRun], floor: dict[str, Turn]) -> None:
    def turn_record(turn: Turn) -> dict[str, Any]:
        return {
            "turn": turn.scenario.key,
            "agent": turn.agent,
            "answer": turn.answer,
            "error": turn.error,
            "outputs": turn.outputs,
            "server_calls": turn.server_calls,
            "calls": [asdict(call) for call in turn.calls],
        }

    trace = {
        "runs": [
            {
                "name": run.name,
                "source": run.source,
                "error": run.error,
                "turns": [turn_record(turn) for turn in run.turns.values()],
            }
            for run in runs
        ],
        "floor": [turn_record(turn) for turn in floor.values()],
    }
    path.write_text(json.dumps(trace, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=BEFORE, help="the revision to compare with")
    parser.add_argument("--only", choices=("before", "after"), help="run one tree only")
    parser.add_argument("--slots", type=int, default=1, help="the simulated server's slots")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per turn")
    parser.add_argument("--tables", type=Path, default=SAMPLE / "tables", help="the CSV folder")
    parser.add_argument("--keep", action="store_true", help="keep the servers' data folders")
    parser.add_argument("--trace", type=Path, help="every call as JSON (default: a temp file)")
    parser.add_argument("--smoke", action="store_true", help="one question, to check it runs")
    args = parser.parse_args()
    args.trace = args.trace or default_trace("local_llm_cost")
    args.scenarios = SCENARIOS[:1] if args.smoke else SCENARIOS
    if args.smoke:
        args.only = "after"
    missing = [s.file for s in args.scenarios if not (args.tables / s.file).is_file()]
    if missing:
        parser.error(f"missing tables in {args.tables}: {', '.join(sorted(set(missing)))}")
    started = time.perf_counter()
    runs: list[TreeRun] = []
    with (
        SimulatedServer(reply, args.slots) as upstream,
        SimulatedServer(reply, args.slots) as floor_upstream,
    ):
        if args.only != "after":
            rev = subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", "--short", args.before],
                capture_output=True, text=True, check=True,
            ).stdout.strip()  # fmt: skip
            before = TreeRun("before", f"git worktree of {rev}")
            print(f"before: {before.source}", flush=True)
            with worktree(rev) as tree:
                run_tree(before, tree, upstream, args)
            runs.append(before)
        if args.only != "before":
            after = TreeRun("after", f"the working tree, {ROOT}")
            print(f"after: {after.source}", flush=True)
            run_tree(after, ROOT, upstream, args)
            runs.append(after)
        floor = run_floor(floor_upstream, printed_outputs(runs), args.tables)
    print_report(runs, floor, args.slots)
    write_trace(args.trace, runs, floor)
    print(f"\ntrace: {args.trace}\nwall time: {time.perf_counter() - started:.0f} s")
    if args.smoke:
        print("(--smoke: one question, so the goals are not judged)")
        failed = [turn for run in runs for turn in run.turns.values() if turn.error]
        if failed or any(run.error for run in runs):
            raise SystemExit(f"--smoke: {len(failed)} turn(s) failed")


if __name__ == "__main__":
    main()
