"""Number provenance's cost: citing a long answer against a megabyte of run output.

`cite` runs when an agent's turn ends, before its answer is stored, so its time is
added to every turn. Baseline, measured in the same run: one regex pass over the
output (`numbers_in`), the least any tracing must do.

    .venv/bin/python -m benchmarks.provenance [--smoke]

`--smoke`: one small case, one round, to check that it runs (`make test` does).
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import time
from collections.abc import Callable

from backend.tools.provenance import RunOutput, cite
from backend.tools.provenance.numbers import claims, numbers_in

ROUNDS = 7
CASES = ((1_000, 20), (25_000, 100), (25_000, 400))  # output lines, numbers in the answer
SMOKE_CASES = ((200, 10),)


def _output(lines: int, seed: int) -> str:
    rng = random.Random(seed)
    regions = ["north", "south", "east", "west", "centre"]
    return "\n".join(
        f"{i:>6}  {rng.choice(regions):<7} {rng.uniform(0, 1e4):>12.4f} {rng.randint(0, 999):>5}"
        for i in range(lines)
    )


def _answer(output: str, numbers: int, seed: int) -> str:
    rng = random.Random(seed)
    rows = [line.split() for line in rng.sample(output.splitlines(), numbers // 2)]
    sentences = [f"In {r[1]}, row {r[0]} sold {float(r[2]):.1f} with {r[3]} units." for r in rows]
    return " ".join(sentences)


def _scan(outputs: list[str]) -> None:
    for text in outputs:
        numbers_in(text)


def _best(function: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one small case, to check it runs")
    args = parser.parse_args()
    rounds = 1 if args.smoke else ROUNDS
    for lines, numbers in SMOKE_CASES if args.smoke else CASES:
        outputs = [_output(lines // 2, seed) for seed in (1, 2)]  # two runs
        runs = [RunOutput(f"run_{i}", "...", text) for i, text in enumerate(outputs)]
        answer = _answer(outputs[1], numbers, 3)
        size = sum(len(text) for text in outputs)
        baseline = _best(functools.partial(_scan, outputs), rounds)
        traced = _best(functools.partial(cite, answer, runs), rounds)
        cited = cite(answer, runs)
        values = [c for c in cited if "." in c["text"]]  # "sold 1234.5": its row's line?
        right = sum(
            c["output_line"].split()[0] == answer[: c["start"]].rsplit("row ", 1)[1].split()[0]
            for c in values
        )
        print(
            f"{size / 1e6:5.2f} MB of output, {len(cited):3d}/{len(claims(answer))} numbers "
            f"cited ({right}/{len(values)} values on their row's line): "
            f"cite {traced * 1000:7.1f} ms, one regex pass {baseline * 1000:6.1f} ms, "
            f"ratio {traced / baseline:4.2f}x"
        )


if __name__ == "__main__":
    main()
