"""`python -m backend.evals run …`: ask an evaluation set on a model, through a server's
API, and print each question's result and the score.

    python -m backend.evals run --set starter [--model NAME] [--agent-type react]
    python -m backend.evals run --set DABENCH_FOLDER   (questions.jsonl, labels.jsonl, tables/)
    python -m backend.evals run --set es_…             (one of your sets)
    python -m backend.evals list | show RUN_ID | compare RUN_ID RUN_ID

The server is `--server` (default http://HOST:PORT of the settings); sign in with
`--token` (or PDA_TOKEN: an access token or an API key), or `--username` with the
password in PDA_PASSWORD. Ctrl-C stops the run on the server. Exits 1 with a one-line
reason, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from backend.evals.report import comparison_table, run_table

_POLL = 1.0  # seconds between looks at a running run
_ENDED = ("completed", "cancelled", "failed", "interrupted")


class CliError(Exception):
    pass


def _check(response: httpx.Response) -> Any:
    if response.is_success:
        return response.json() if response.content else None
    try:
        detail = response.json().get("detail")
    except ValueError:
        detail = response.text[:200]
    raise CliError(f"{response.request.method} {response.request.url.path}: {detail}")


def _client(args: argparse.Namespace) -> httpx.Client:
    client = httpx.Client(base_url=args.server, timeout=120)
    token = args.token or os.environ.get("PDA_TOKEN", "")
    if not token and args.username:
        password = os.environ.get("PDA_PASSWORD", "")
        if not password:
            raise CliError("--username needs the password in PDA_PASSWORD")
        body = {"username": args.username, "password": password}
        token = _check(client.post("/api/auth/login", json=body))["access_token"]
    if not token:
        raise CliError("sign in: --token, PDA_TOKEN, or --username with PDA_PASSWORD")
    client.headers["Authorization"] = f"Bearer {token}"
    return client


def _set_id(client: httpx.Client, chosen: str) -> str:
    if chosen == "starter":
        sets = _check(client.get("/api/evals/sets"))
        mine = next((s for s in sets if s["source"] == "starter"), None)
        if mine is None:
            print("adding the starter set (its files are written once)…", flush=True)
            mine = _check(client.post("/api/evals/sets/starter"))
        return str(mine["id"])
    folder = Path(chosen)
    if folder.is_dir():
        return _import(client, folder)
    return chosen


def _import(client: httpx.Client, folder: Path) -> str:
    tables = folder / "tables"
    for needed in (folder / "questions.jsonl", folder / "labels.jsonl", tables):
        if not needed.exists():
            raise CliError(
                f"{needed} is missing: a DABench folder holds questions.jsonl, "
                "labels.jsonl and tables/"
            )
    with ExitStack() as stack:
        files = [
            (
                "questions",
                ("questions.jsonl", stack.enter_context((folder / "questions.jsonl").open("rb"))),
            ),
            ("labels", ("labels.jsonl", stack.enter_context((folder / "labels.jsonl").open("rb")))),
        ]
        files += [
            ("tables", (path.name, stack.enter_context(path.open("rb"))))
            for path in sorted(tables.iterdir())
            if path.is_file()
        ]
        made = _check(client.post("/api/evals/sets", data={"name": folder.name}, files=files))
    print(f"imported {made['question_count']} questions as set {made['id']}", flush=True)
    return str(made["id"])


def _follow(client: httpx.Client, run_id: str) -> dict[str, Any]:
    shown = -1
    while True:
        run = _check(client.get(f"/api/evals/runs/{run_id}"))
        if run["done"] != shown or run["status"] in _ENDED:
            shown = run["done"]
            asking = f", asking {run['current']}" if run.get("current") else ""
            print(f"  {run['status']}: {run['done']}/{run['total']}{asking}", flush=True)
        if run["status"] in _ENDED:
            return dict(run)
        time.sleep(_POLL)


def _run(client: httpx.Client, args: argparse.Namespace) -> int:
    set_id = _set_id(client, args.set)
    body = {"set_id": set_id, "model": args.model, "agent_type": args.agent_type}
    run = _check(client.post("/api/evals/runs", json=body))
    print(f"run {run['id']}: {run['total']} questions on {run['model']}", flush=True)
    try:
        finished = _follow(client, run["id"])
    except KeyboardInterrupt:
        _check(client.post(f"/api/evals/runs/{run['id']}/cancel"))
        finished = _check(client.get(f"/api/evals/runs/{run['id']}"))
    print(run_table(finished))
    return 0 if finished["status"] == "completed" else 1


def _list(client: httpx.Client) -> None:
    for s in _check(client.get("/api/evals/sets")):
        print(f"set {s['id']}  {s['name']} ({s['source']}, {s['question_count']} questions)")
    for r in _check(client.get("/api/evals/runs")):
        score = r["score"]
        print(
            f"run {r['id']}  {r['set_name']} on {r['model']} ({r['agent_type']}): "
            f"{r['status']}, {score['right']}/{score['answered']} right of {r['total']}"
        )


def _parser() -> argparse.ArgumentParser:
    from backend.config import load_settings

    try:
        settings = load_settings()
        default = f"http://{settings.HOST}:{settings.PORT}"
    except Exception:  # no usable settings here: the flag says where the server is
        default = "http://127.0.0.1:8000"
    parser = argparse.ArgumentParser(
        prog="python -m backend.evals", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--server", default=default, help=f"the server (default {default})")
    parser.add_argument("--token", default="", help="an access token or API key (or PDA_TOKEN)")
    parser.add_argument("--username", default="", help="sign in as this user (PDA_PASSWORD)")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="ask a set on a model and print the results")
    run.add_argument("--set", required=True, help="starter, a DABench folder, or a set id")
    run.add_argument("--model", default="", help="default: the server's model")
    run.add_argument(
        "--agent-type", default="auto", choices=("auto", "react", "plan_execute", "chat")
    )
    commands.add_parser("list", help="your sets and runs")
    show = commands.add_parser("show", help="a run's results")
    show.add_argument("run_id")
    compare = commands.add_parser("compare", help="two runs side by side")
    compare.add_argument("first")
    compare.add_argument("second")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        with _client(args) as client:
            if args.command == "run":
                return _run(client, args)
            if args.command == "list":
                _list(client)
            elif args.command == "show":
                print(run_table(_check(client.get(f"/api/evals/runs/{args.run_id}"))))
            else:
                path = f"/api/evals/runs/{args.first}/compare/{args.second}"
                print(comparison_table(_check(client.get(path))))
    except (CliError, httpx.HTTPError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
