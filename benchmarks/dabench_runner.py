"""How does an agent do on InfiAgent-DABench questions?

Each question (a jsonl line with `question`, `constraints`, `format` and
`file_name`) goes to `POST /api/chat` in a fresh session that holds only its CSV,
asked with the chosen `agent_type` and model. The prompt is DABench's
"Question / Constraints / Format" plus the file's name. The `@name[value]` pairs
in the answer (only the answer, as DABench reads it) are scored against the
labels jsonl by the server's own scoring (backend/core/evals/scoring.py): as the
official closed-form grader, a value is right when it equals the label, or both
parse as floats within 1e-6, and a name given twice counts its last value; values
are stripped first, words compared without case, and thousands separators ignored.
A question is right when all its labelled sub-questions are. (The evaluation API,
`/api/evals`, imports the same files and runs them in the product.) Unlike the
official script, a question that failed (HTTP error, timeout) stays in the totals,
as wrong.

LLM calls per question are counted in the server's prompt log
(DATA_DIR/logs/prompts.jsonl): each coder-stage record is one call, and the
turn's own record is one more only for `chat`, which calls the model directly.
Against an already running server (--server) the log is read only when
--prompt-log names it; otherwise `metadata.iterations` (tool executions; one
call for `chat`) stands in, and the output says so. The log is read after the
last question, so a call cut off by --timeout on a running server may land late.

    .venv/bin/python -m benchmarks.dabench_runner [--agent-type react] [--limit N]
        [--model NAME] [--backend embedded] [--threads 1] [--trace PATH]
        [--server URL --token T [--prompt-log PATH]] [--timeout 600]
        [--questions Q --labels L --tables DIR] [--smoke]

`--smoke`: the first question only, with `react` on the scripted model (a script that
runs code over the table and answers without any `@name[value]`), to check that the
runner, the server and the scoring run (`make test` does); it fails when the request does.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from backend.core.evals.questions import Expected
from backend.core.evals.scoring import extract_answers, is_equal
from backend.storage.sessions import check_key, client_id, valid_key
from benchmarks.coder_small_model import (
    REQUEST_TIMEOUT,
    benchmark_server,
    clean_up,
    default_trace,
    new_session,
)
from tests.support.live_server import ROOT

SAMPLE = ROOT.parent / "shared" / "dabench-sample"
AGENT_TYPES = ("auto", "react", "plan_execute", "chat")
LEVELS = ("easy", "medium", "hard")
# --smoke's model: whatever the question, the coder prints the table's size.
SMOKE_REPLIES = [
    {"when": "[stage: react]", "content": "Action: coder\nAction Input: the table's size"},
    {"when": "[stage: generate]", "content": "```python\nprint('rows', len(df1))\n```"},
    {"when": "[stage: review]", "content": '{"answers_question": true}'},
    {"when": "[stage: answer]", "content": "The table's size is printed above."},
    {"content": "Final Answer: the table's size is printed above.", "repeat": True},
]


@dataclass(frozen=True)
class Question:
    id: int
    question: str
    constraints: str
    format: str
    file_name: str
    level: str = ""

    @property
    def prompt(self) -> str:
        return (
            f"Question: {self.question}\nConstraints: {self.constraints}\n"
            f"Format: {self.format}\nThe data is in {self.file_name}."
        )


@dataclass
class Outcome:
    id: int
    level: str
    file_name: str
    question: str
    prompt: str
    expected: dict[str, str]
    session_id: str = ""
    answer: str = ""
    extracted: dict[str, str] = field(default_factory=dict)
    results: dict[str, bool] = field(default_factory=dict)
    agent_type: str = ""
    model: str = ""
    llm_calls: int = 0
    wall_s: float = 0.0
    metadata: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    @property
    def sub_correct(self) -> int:
        return sum(self.results.values())

    @property
    def correct(self) -> bool:
        return bool(self.results) and all(self.results.values())


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load_questions(path: Path) -> list[Question]:
    return [
        Question(
            id=int(row["id"]),
            question=row["question"],
            constraints=row.get("constraints", ""),
            format=row["format"],
            file_name=row["file_name"],
            level=row.get("level", ""),
        )
        for row in read_jsonl(path)
    ]


def load_labels(path: Path) -> dict[int, dict[str, str]]:
    """Per question id, its labelled answers by name (`common_answers` pairs)."""
    return {
        int(row["id"]): {str(name): str(value) for name, value in row["common_answers"]}
        for row in read_jsonl(path)
    }


def score(outcome: Outcome) -> None:
    outcome.extracted = extract_answers(outcome.answer)
    outcome.results = {
        name: is_equal(outcome.extracted.get(name), Expected(name, label))
        for name, label in outcome.expected.items()
    }


def ask(
    client: httpx.Client,
    tables: Path,
    question: Question,
    expected: dict[str, str],
    agent_type: str,
    model: str,
) -> Outcome:
    outcome = Outcome(
        question.id,
        question.level,
        question.file_name,
        question.question,
        question.prompt,
        expected,
    )
    started = time.perf_counter()
    try:  # any failure is this question's result, not a reason to stop the run
        outcome.session_id = new_session(
            client, tables, question.file_name, f"dabench-{question.id}"
        )
        started = time.perf_counter()
        body = {
            "message": question.prompt,
            "session_id": outcome.session_id,
            "agent_type": agent_type,
            "model": model,
        }
        response = client.post("/api/chat", json=body)
        if response.status_code != 200:
            outcome.error = f"HTTP {response.status_code}: {response.text[:300]}"
        else:
            reply = response.json()
            outcome.answer = reply["answer"] or ""
            outcome.agent_type = reply["agent_type"]
            outcome.model = reply["model"]
            outcome.metadata = reply["metadata"]
    except httpx.TimeoutException as exc:
        outcome.error = f"timed out ({type(exc).__name__}, limit {client.timeout.read} s)"
    except (httpx.HTTPError, OSError) as exc:
        outcome.error = f"{type(exc).__name__}: {exc}"
    outcome.wall_s = time.perf_counter() - started
    score(outcome)
    return outcome


def count_llm_calls(outcomes: list[Outcome], prompt_log: Path | None) -> None:
    """Each outcome's LLM calls: from the prompt log, else the agent's iterations."""
    if prompt_log is None:
        for outcome in outcomes:
            iterations = int(outcome.metadata.get("iterations", 0))
            outcome.llm_calls = 1 if outcome.agent_type == "chat" else iterations
        return
    calls: dict[str, int] = {}
    records = read_jsonl(prompt_log) if prompt_log.exists() else []
    for record in records:
        # The turn's own record repeats the conversation; only `chat` made that call itself.
        if "stage" in record or record.get("agent_type") == "chat":
            session = str(record.get("session_id"))
            if valid_key(session):  # the log names a session by its key, `u<user>-<id>`
                session = client_id(check_key(session))
            calls[session] = calls.get(session, 0) + 1
    for outcome in outcomes:
        outcome.llm_calls = calls.get(outcome.session_id, 0)


def note(outcome: Outcome) -> str:
    if outcome.error:
        return outcome.error.strip().splitlines()[0][:70]
    missing = [name for name in outcome.expected if name not in outcome.extracted]
    wrong = [
        f"{name}={outcome.extracted[name][:12]!r}"
        for name, ok in outcome.results.items()
        if not ok and name in outcome.extracted
    ]
    parts = []
    if missing:
        parts.append(f"missing {', '.join(missing)}")
    if wrong:
        parts.append(f"wrong {', '.join(wrong)}")
    return "; ".join(parts)[:70]


def report(outcomes: list[Outcome], calls_source: str) -> None:
    header = (
        f"{'id':>4} {'level':<6} {'ok':<3} {'sub':>5} {'agent':<12} {'calls':>5} "
        f"{'wall s':>7}  note"
    )
    print(header)
    print("-" * len(header))
    for o in outcomes:
        print(
            f"{o.id:>4} {o.level:<6} {'yes' if o.correct else 'no':<3} "
            f"{f'{o.sub_correct}/{len(o.results)}':>5} {o.agent_type or '-':<12} "
            f"{o.llm_calls:>5} {o.wall_s:>7.1f}  {note(o)}"
        )
    print("-" * len(header))
    if not outcomes:
        print("no questions were asked")
        return
    right = sum(o.correct for o in outcomes)
    subs = sum(len(o.results) for o in outcomes)
    sub_right = sum(o.sub_correct for o in outcomes)
    levels = sorted(
        {o.level for o in outcomes if o.level},
        key=lambda level: (LEVELS.index(level) if level in LEVELS else len(LEVELS), level),
    )
    by_level = []
    for level in levels:
        group = [o for o in outcomes if o.level == level]
        by_level.append(f"{level} {sum(o.correct for o in group)}/{len(group)}")
    print(
        f"accuracy by question: {right}/{len(outcomes)} ({right / len(outcomes):.1%})"
        + (f" ({', '.join(by_level)})" if by_level else "")
    )
    print(f"accuracy by sub-question: {sub_right}/{subs} ({sub_right / max(subs, 1):.1%})")
    errors = sum(o.error is not None for o in outcomes)
    no_answer = sum(not o.error and not o.extracted for o in outcomes)
    print(f"failed requests: {errors}; answers without any @name[value]: {no_answer}")
    print(
        f"median LLM calls: {statistics.median(o.llm_calls for o in outcomes):g} ({calls_source})"
    )
    print(f"median wall time: {statistics.median(o.wall_s for o in outcomes):.1f} s")


def first_model(client: httpx.Client) -> str:
    response = client.get("/v1/models")
    response.raise_for_status()
    return str(response.json()["data"][0]["id"])


def run(
    client: httpx.Client,
    args: argparse.Namespace,
    questions: list[Question],
    labels: dict[int, dict[str, str]],
    outcomes: list[Outcome],
) -> None:
    model = args.model or first_model(client)
    print(
        f"agent_type: {args.agent_type}; model: {model}; {len(questions)} questions; "
        f"tables: {args.tables}"
    )
    for question in questions:
        outcome = ask(client, args.tables, question, labels[question.id], args.agent_type, model)
        outcomes.append(outcome)
        state = f"error ({outcome.error[:60]})" if outcome.error else "answered"
        print(
            f"  {question.id} {state}: {outcome.sub_correct}/{len(outcome.results)} right "
            f"in {outcome.wall_s:.1f} s",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=Path, default=SAMPLE / "questions.jsonl")
    parser.add_argument("--labels", type=Path, default=SAMPLE / "labels.jsonl")
    parser.add_argument("--tables", type=Path, default=SAMPLE / "tables", help="the CSV folder")
    parser.add_argument("--agent-type", choices=AGENT_TYPES, default="react")
    parser.add_argument("--model", default="", help="default: the server's first model")
    parser.add_argument("--limit", type=int, help="only the first N questions")
    parser.add_argument(
        "--timeout", type=float, default=REQUEST_TIMEOUT, help="seconds per request"
    )
    parser.add_argument("--backend", default="embedded", help="LLM_BACKEND for the server")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="EMBEDDED_THREADS for the server (0: all cores, the server's default)",
    )
    parser.add_argument("--server", help="use this running server instead of starting one")
    parser.add_argument("--token", help="bearer token for --server")
    parser.add_argument(
        "--prompt-log", type=Path, help="with --server: its DATA_DIR/logs/prompts.jsonl"
    )
    parser.add_argument("--trace", type=Path, help="per-question JSON trace (default: a temp file)")
    parser.add_argument("--keep", action="store_true", help="keep the started server's data")
    parser.add_argument("--smoke", action="store_true", help="one scripted question, to check")
    args = parser.parse_args()
    if args.smoke:
        if args.server:
            parser.error("--smoke starts its own server")
        args.limit, args.backend, args.agent_type = 1, "scripted", "react"
    if args.server and not args.token:
        parser.error("--server needs --token")
    if args.prompt_log and not args.server:
        parser.error("--prompt-log is for --server; a started server's log is read anyway")
    questions = load_questions(args.questions)[: args.limit]
    labels = load_labels(args.labels)
    unlabelled = [q.id for q in questions if q.id not in labels]
    if unlabelled:
        parser.error(f"no labels for questions {unlabelled} in {args.labels}")
    trace = args.trace or default_trace("dabench_runner")

    outcomes: list[Outcome] = []
    if args.server:
        calls_source = (
            f"records in {args.prompt_log}"
            if args.prompt_log
            else "metadata.iterations, i.e. tool executions (chat: 1): no --prompt-log"
        )
        headers = {"Authorization": f"Bearer {args.token}"}
        try:
            with httpx.Client(
                base_url=args.server, headers=headers, timeout=args.timeout
            ) as client:
                run(client, args, questions, labels, outcomes)
        finally:
            count_llm_calls(outcomes, args.prompt_log)
            trace.write_text(json.dumps([asdict(o) for o in outcomes], indent=2))
    else:
        calls_source = "records in the prompt log"
        root = Path(tempfile.mkdtemp(prefix="dabench-"))
        server = benchmark_server(root, args.backend, args.threads)
        if args.smoke:
            (root / "replies.json").write_text(json.dumps(SMOKE_REPLIES))
            server.env["SCRIPTED_REPLIES"] = str(root / "replies.json")
        try:
            server.start()
            print(f"backend: {args.backend} (EMBEDDED_THREADS={args.threads})")
            with server.client(timeout=args.timeout) as client:
                run(client, args, questions, labels, outcomes)
        finally:
            server.stop()
            count_llm_calls(outcomes, server.data_dir / "logs" / "prompts.jsonl")
            trace.write_text(json.dumps([asdict(o) for o in outcomes], indent=2))
            clean_up(root, server, args.keep)
    print()
    report(outcomes, calls_source)
    print(f"trace: {trace}")
    failed = [o for o in outcomes if o.error or not o.answer]
    if args.smoke and (failed or not outcomes):
        raise SystemExit(f"--smoke: {len(failed)} question(s) got no answer")


if __name__ == "__main__":
    main()
