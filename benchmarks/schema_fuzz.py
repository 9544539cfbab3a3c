"""Hostile input at length: schemathesis over the whole OpenAPI schema, links included.

Starts a live server on the scripted model, logs in as the admin and runs what
`schemathesis run` runs, with the admin's token on every request: the coverage cases
(boundaries, wrong types, missing values, no token at all), `--examples` generated
requests per operation, valid and invalid, and stateful sequences along the links
schemathesis infers (a started run into its events, a listed conversation into its
deletion, ...). Prints the cases by phase, the responses by status class, each
check's verdicts and failures, and every distinct failure with a curl command.

    .venv/bin/python -m benchmarks.schema_fuzz [--examples 200] [--seed 12] [--smoke]

Goal: 0 responses of 500 or above (`not_a_server_error`) and 0 schema violations (the
other checks). `make test` runs the same with few examples (tests/api/test_schema_fuzz.py),
and this script with `--smoke`: one fuzzed request per operation and the stateful
sequences, without the coverage cases (thousands), to check that it runs.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from schemathesis.engine import Status, events, from_schema
from schemathesis.specs.openapi.schemas import OpenApiSchema

from tests.support.live_server import LiveServer
from tests.support.schema_fuzz import CHECKS, REPLIES, load_schema


@dataclass
class Tally:
    cases: Counter[str] = field(default_factory=Counter)  # by phase
    responses: Counter[str] = field(default_factory=Counter)  # by status class
    verdicts: Counter[str] = field(default_factory=Counter)  # by check
    failures: Counter[str] = field(default_factory=Counter)  # by check
    distinct: dict[tuple[str, str, str], str] = field(default_factory=dict)  # -> curl
    errors: list[str] = field(default_factory=list)  # requests that got no answer, schema errors
    seconds: float = 0.0

    def record(self, event: events.ScenarioFinished) -> None:
        recorder = event.recorder
        self.cases[event.phase.value] += len(recorder.cases)
        for interaction in recorder.interactions.values():
            if interaction.response is not None:
                self.responses[f"{interaction.response.status_code // 100}xx"] += 1
        for case_id, checks in recorder.checks.items():
            operation = recorder.cases[case_id].value.operation.label
            for check in checks:
                self.verdicts[check.name] += 1
                if check.status == Status.FAILURE and check.failure_info is not None:
                    self.failures[check.name] += 1
                    failure = check.failure_info.failure
                    key = (check.name, operation, failure.title)
                    self.distinct.setdefault(key, check.failure_info.code_sample)


def fuzz(schema: OpenApiSchema) -> Tally:
    tally = Tally()
    started = time.monotonic()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            tally.record(event)
        elif isinstance(event, events.NonFatalError):
            tally.errors.append(f"{event.label}: {event.info.title}: {event.info.message}")
        elif isinstance(event, events.FatalError):
            raise event.exception
    tally.seconds = time.monotonic() - started
    return tally


def report(tally: Tally, examples: int) -> bool:
    """Print the figures; whether the goal was met."""
    cases = ", ".join(f"{phase} {n}" for phase, n in tally.cases.items() if n)
    print(f"{sum(tally.cases.values())} cases in {tally.seconds:.0f} s ({cases})")
    print(f"fuzzing: up to {examples} requests per operation, valid and invalid")
    print("responses: " + ", ".join(f"{k} {n}" for k, n in sorted(tally.responses.items())))
    print()
    width = max(len(name) for name in CHECKS)
    print(f"{'check':<{width}}  {'verdicts':>8}  {'failures':>8}")
    for name in CHECKS:
        print(f"{name:<{width}}  {tally.verdicts[name]:>8}  {tally.failures[name]:>8}")
    server_errors = tally.failures["not_a_server_error"]
    violations = sum(n for name, n in tally.failures.items() if name != "not_a_server_error")
    print()
    print(f"responses of 500 or above: {server_errors} (goal 0)")
    print(f"schema violations: {violations} (goal 0)")
    print(f"requests without an answer, schema errors: {len(tally.errors)}")
    for (check, operation, title), curl in sorted(tally.distinct.items()):
        print(f"\n{operation}: {check}: {title}\n    {curl}")
    for error in tally.errors:
        print(f"\nerror: {error}")
    return server_errors == violations == len(tally.errors) == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=200, help="fuzzed per operation")
    parser.add_argument("--seed", type=int, default=12, help="seeds the generated requests")
    parser.add_argument("--smoke", action="store_true", help="a few cases, to check it runs")
    args = parser.parse_args()
    phases: dict[str, object] = {}
    if args.smoke:
        args.examples, phases = 1, {"coverage": {"enabled": False}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "replies.json").write_text(json.dumps(REPLIES))
        server = LiveServer(
            root / "data",
            LLM_BACKEND="scripted",
            SCRIPTED_REPLIES=str(root / "replies.json"),
            ADMIN_PASSWORD="benchmark-password",
            LOG_LEVEL="WARNING",
        )
        try:
            server.start()
            schema = load_schema(
                server, seed=args.seed, generation={"max-examples": args.examples}, phases=phases
            )
            tally = fuzz(schema)
        finally:
            server.stop()
    return 0 if report(tally, args.examples) else 1


if __name__ == "__main__":
    raise SystemExit(main())
