"""How well does the python_coder pipeline cope with a weak model?

Ten simple data questions over generated CSVs go to `POST /api/tools/python_coder`
(generate mode) of a real server running the embedded 135M model, one fresh
session each. Eight are ones the small-model analysis spec can express; two (a
share in percent, a filtered mean) need free-form code. A question is solved when
the expected number, computed here with pandas, is both in the sandbox's printed
output and in the answer (within a relative 1e-3, or rounded to the printed
decimals; group questions check the named group's value).

Per question we print where the code came from ("spec" or "free-form"), the
execution attempts, LLM calls, tokens and wall time. The baseline, measured in
the same run, is a plain `code`-mode run of the reference solution through the
same API in a fresh session (median of --baseline-runs), so each wall time is
also shown as a ratio to it.

llama.cpp runs with one thread by default here (--threads). On an idle 2-core
machine both cores are about a quarter faster, but they stall whenever anything
else runs: one answer call then takes minutes instead of seconds. `--threads 0`
is the server's own default (all cores).

    .venv/bin/python -m benchmarks.coder_small_model [--questions 10] [--keep]
        [--backend embedded] [--threads 1] [--trace PATH] [--smoke]

`--smoke`: the first question, one baseline run, to check that it runs (`make test`
does): the embedded model loads and the question is answered; it fails on an HTTP error.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import statistics
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd

from tests.support.live_server import LiveServer

PASSWORD = "benchmark-password"
REQUEST_TIMEOUT = 600.0
# Thousands separators only in groups of three, so "1,2,3" stays three numbers.
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class Question:
    id: str
    file: str
    query: str
    solution: str  # a pandas expression over `df`, the reference answer
    free_form: bool = False  # the analysis spec cannot express it


QUESTIONS = [
    Question("q01", "employees.csv", "What is the average salary?", "df['salary'].mean()"),
    Question("q02", "employees.csv", "How many employees are there?", "len(df)"),
    Question(
        "q03",
        "sales.csv",
        "What share of the revenue (price times units) comes from the North region, in percent?",
        "(df['price'] * df['units'])[df['region'] == 'North'].sum()"
        " / (df['price'] * df['units']).sum() * 100",
        free_form=True,
    ),
    Question("q04", "weather.csv", "What was the highest temperature?", "df['temperature'].max()"),
    Question(
        "q05", "sales.csv", "How many different products are sold?", "df['product'].nunique()"
    ),
    Question(
        "q06",
        "employees.csv",
        "What is the mean salary per department? Give the value for Engineering.",
        "df.groupby('department')['salary'].mean()['Engineering']",
    ),
    Question(
        "q07",
        "sales.csv",
        "What is the mean price of the sales with more than 10 units?",
        "df.loc[df['units'] > 10, 'price'].mean()",
        free_form=True,
    ),
    Question("q08", "sales.csv", "How many units were sold in total?", "df['units'].sum()"),
    Question("q09", "employees.csv", "What is the median age?", "df['age'].median()"),
    Question(
        "q10",
        "weather.csv",
        "How strongly are temperature and rainfall correlated? Give the correlation coefficient.",
        "df['temperature'].corr(df['rainfall'])",
    ),
]


@dataclass
class Outcome:
    id: str
    question: str
    expected: float
    solved: bool = False
    in_output: bool = False
    in_answer: bool = False
    origin: str = ""
    attempts: int = 0
    llm_calls: int = 0
    tokens: int = 0
    wall_s: float = 0.0
    server_s: float = 0.0
    baseline_s: list[float] = field(default_factory=list)
    success: bool = False
    output: str = ""
    answer: str = ""
    code: str = ""
    error: str | None = None
    analysis_spec: dict[str, Any] | None = None
    review_skipped: str | None = None
    execution_history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def baseline_median(self) -> float:
        return statistics.median(self.baseline_s)


def make_frames(seed: int = 7) -> dict[str, pd.DataFrame]:
    """Three small, seeded tables: sales, employees and weather."""
    rng = np.random.default_rng(seed)
    n = 300
    sales = pd.DataFrame(
        {
            "region": rng.choice(["North", "South", "East", "West"], n),
            "product": rng.choice(["Anvil", "Bolt", "Clamp", "Drill", "Easel", "File"], n),
            "price": rng.uniform(2, 80, n).round(2),
            "units": rng.integers(1, 21, n),
        }
    )
    n = 200
    departments = rng.choice(["Engineering", "Sales", "Marketing", "Support", "HR"], n)
    base = {"Engineering": 82_000, "Sales": 61_000, "Marketing": 58_000, "Support": 45_000}
    employees = pd.DataFrame(
        {
            "department": departments,
            "age": rng.integers(22, 65, n),
            "salary": [base.get(d, 52_000) + int(rng.normal(0, 9_000)) for d in departments],
        }
    )
    n = 240
    temperature = rng.normal(18, 7, n).round(1)
    weather = pd.DataFrame(
        {
            "city": rng.choice(["Oslo", "Lima", "Cairo", "Perth", "Quito"], n),
            "temperature": temperature,
            "rainfall": (40 - 1.2 * temperature + rng.normal(0, 8, n)).clip(0).round(1),
        }
    )
    return {"sales.csv": sales, "employees.csv": employees, "weather.csv": weather}


def numbers(text: str) -> list[tuple[float, int]]:
    """Each number in `text` with its count of printed decimals."""
    found = []
    for match in _NUMBER.findall(text):
        plain = match.replace(",", "")
        mantissa = re.split("[eE]", plain)[0]
        found.append((float(plain), len(mantissa.split(".")[1]) if "." in mantissa else 0))
    return found


def mentions(expected: float, text: str) -> bool:
    """`text` states `expected` within a relative 1e-3, or rounded to its printed decimals."""
    for value, decimals in numbers(text):
        rounding = 0.5 * 10.0**-decimals if decimals else 0.0
        if abs(value - expected) <= max(1e-3 * abs(expected), rounding, 1e-12):
            return True
    return False


def default_trace(name: str) -> Path:
    return Path(tempfile.gettempdir()) / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"


def benchmark_server(root: Path, backend: str, threads: int) -> LiveServer:
    """A server (not started yet) with its DATA_DIR under `root`."""
    return LiveServer(
        root / "data",
        LLM_BACKEND=backend,
        EMBEDDED_THREADS=str(threads),
        ADMIN_PASSWORD=PASSWORD,
        LOG_LEVEL="WARNING",
    )


def clean_up(root: Path, server: LiveServer, keep: bool) -> None:
    if keep:
        print(f"kept: {root} (server log {server.log_path})")
    else:
        shutil.rmtree(root, ignore_errors=True)


def new_session(client: httpx.Client, data: Path, file: str, prefix: str) -> str:
    session_id = f"{prefix}-{uuid.uuid4().hex[:10]}"
    with (data / file).open("rb") as handle:
        response = client.post(
            "/api/upload", data={"session_id": session_id}, files={"file": (file, handle)}
        )
    response.raise_for_status()
    return session_id


def run_baseline(client: httpx.Client, data: Path, question: Question, expected: float) -> float:
    """Seconds for a `code`-mode run of the reference solution in a fresh session."""
    session_id = new_session(client, data, question.file, f"base-{question.id}")
    body = {
        "session_id": session_id,
        "code": f"print({question.solution})",
        "file_paths": {question.file: "df"},
    }
    started = time.perf_counter()
    response = client.post("/api/tools/python_coder", json=body)
    elapsed = time.perf_counter() - started
    response.raise_for_status()
    reply = response.json()
    if not reply["success"] or not mentions(expected, reply["data"]["stdout"]):
        raise RuntimeError(f"the reference solution of {question.id} failed: {reply}")
    return elapsed


def run_question(
    client: httpx.Client, data: Path, question: Question, expected: float, baseline_runs: int
) -> Outcome:
    outcome = Outcome(question.id, question.query, expected)
    outcome.baseline_s = [
        run_baseline(client, data, question, expected) for _ in range(baseline_runs)
    ]
    session_id = new_session(client, data, question.file, f"coder-{question.id}")
    started = time.perf_counter()
    response = client.post(
        "/api/tools/python_coder", json={"session_id": session_id, "query": question.query}
    )
    outcome.wall_s = time.perf_counter() - started
    if response.status_code != 200:  # a pipeline failure to report, not a reason to stop
        outcome.origin = "http-error"
        outcome.error = f"HTTP {response.status_code}: {response.text[:300]}"
        return outcome
    reply = response.json()
    outcome.success = bool(reply["success"])
    outcome.output = reply["output"] or ""
    outcome.answer = reply["answer"] or ""
    outcome.code = reply["code"] or ""
    outcome.error = reply["error"]
    outcome.analysis_spec = reply["analysis_spec"]
    outcome.review_skipped = reply["review_skipped"]
    outcome.execution_history = reply["execution_history"]
    outcome.origin = "spec" if reply["analysis_spec"] is not None else "free-form"
    outcome.attempts = len(reply["execution_history"])
    outcome.llm_calls = int(reply["llm_calls"])
    outcome.tokens = int(reply["tokens"])
    outcome.server_s = float(reply["execution_time"])
    outcome.in_output = mentions(expected, outcome.output)
    outcome.in_answer = mentions(expected, outcome.answer)
    outcome.solved = outcome.in_output and outcome.in_answer
    return outcome


def why_not(outcome: Outcome) -> str:
    if outcome.solved:
        return ""
    if outcome.error:
        return outcome.error.strip().splitlines()[-1][:60]
    checks = (("output", outcome.in_output), ("answer", outcome.in_answer))
    where = [name for name, ok in checks if not ok]
    printed = " ".join(outcome.output.split())[:40]
    return f"not in {' and '.join(where)}; printed {printed!r}"


def report(outcomes: list[Outcome], questions: list[Question]) -> None:
    header = (
        f"{'id':<4} {'solved':<6} {'via':<9} {'att':>3} {'calls':>5} {'tokens':>6} "
        f"{'wall s':>7} {'base s':>6} {'ratio':>6}  {'expected':>12}  note"
    )
    print(header)
    print("-" * len(header))
    for outcome in outcomes:
        ratio = outcome.wall_s / outcome.baseline_median
        print(
            f"{outcome.id:<4} {'yes' if outcome.solved else 'no':<6} {outcome.origin:<9} "
            f"{outcome.attempts:>3} {outcome.llm_calls:>5} {outcome.tokens:>6} "
            f"{outcome.wall_s:>7.2f} {outcome.baseline_median:>6.2f} {ratio:>5.1f}x  "
            f"{outcome.expected:>12.6g}  {why_not(outcome)}"
        )
    print("-" * len(header))
    free = {q.id for q in questions if q.free_form}
    solved = sum(o.solved for o in outcomes)
    by_kind = ", ".join(
        f"{label} {sum(o.solved for o in group)}/{len(group)}"
        for label, group in (
            ("spec-expressible", [o for o in outcomes if o.id not in free]),
            ("free-form questions", [o for o in outcomes if o.id in free]),
        )
        if group
    )
    print(f"solved: {solved}/{len(outcomes)} ({by_kind})")
    print(f"code via spec: {sum(o.origin == 'spec' for o in outcomes)}/{len(outcomes)}")
    print(f"median LLM calls: {statistics.median(o.llm_calls for o in outcomes):g}")
    print(f"median tokens: {statistics.median(o.tokens for o in outcomes):g}")
    wall = statistics.median(o.wall_s for o in outcomes)
    base = statistics.median(o.baseline_median for o in outcomes)
    ratio = statistics.median(o.wall_s / o.baseline_median for o in outcomes)
    print(
        f"median wall time: {wall:.2f} s; baseline (code mode, reference solution) "
        f"{base:.2f} s; median ratio {ratio:.1f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=len(QUESTIONS), help="the first N")
    parser.add_argument("--baseline-runs", type=int, default=3)
    parser.add_argument("--backend", default="embedded", help="LLM_BACKEND for the server")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="EMBEDDED_THREADS for the server (0: all cores, the server's default)",
    )
    parser.add_argument("--trace", type=Path, help="per-question JSON trace (default: a temp file)")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    parser.add_argument("--smoke", action="store_true", help="one question, to check it runs")
    args = parser.parse_args()
    if args.smoke:
        args.questions, args.baseline_runs = 1, 1
    questions = QUESTIONS[: max(1, min(args.questions, len(QUESTIONS)))]
    trace = args.trace or default_trace("coder_small_model")

    root = Path(tempfile.mkdtemp(prefix="coder-small-model-"))
    data = root / "csv"
    data.mkdir()
    frames = make_frames()
    for name, frame in frames.items():
        frame.to_csv(data / name, index=False)
    expected = {q.id: float(eval(q.solution, {"df": frames[q.file]})) for q in questions}
    assert all(math.isfinite(value) for value in expected.values())

    server = benchmark_server(root, args.backend, args.threads)
    outcomes: list[Outcome] = []
    try:
        server.start()
        print(
            f"backend: {args.backend} (EMBEDDED_THREADS={args.threads}); "
            f"{len(questions)} questions; data: {data}"
        )
        with server.client(timeout=REQUEST_TIMEOUT) as client:
            for question in questions:
                outcome = run_question(
                    client, data, question, expected[question.id], args.baseline_runs
                )
                outcomes.append(outcome)
                print(
                    f"  {question.id} {'solved' if outcome.solved else 'not solved'} "
                    f"in {outcome.wall_s:.1f} s: {question.query}",
                    flush=True,
                )
    finally:
        server.stop()
        trace.write_text(json.dumps([asdict(o) for o in outcomes], indent=2))
        clean_up(root, server, args.keep)
    print()
    report(outcomes, questions)
    print(f"trace: {trace}")
    if args.smoke and any(o.origin == "http-error" for o in outcomes):
        raise SystemExit("--smoke: a request failed")


if __name__ == "__main__":
    main()
