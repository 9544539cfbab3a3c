"""An evaluation run as a terminal table: one line per question, then the score."""

from __future__ import annotations

from typing import Any


def _note(result: dict[str, Any]) -> str:
    if result.get("error"):
        return str(result["error"]).splitlines()[0][:60]
    wrong = [
        f"{name}={result['extracted'].get(name, '-')!s:.12} (want {value!s:.12})"
        for name, value in result["expected"].items()
        if not result["values"].get(name)
    ]
    return "; ".join(wrong)[:60]


def run_table(run: dict[str, Any]) -> str:
    """The run's results, its score with its 95% interval, and its score per type."""
    header = f"{'question':<10} {'type':<11} {'ok':<3} {'calls':>5} {'tokens':>7} {'s':>7}  note"
    lines = [header, "-" * len(header)]
    for r in run["results"]:
        lines.append(
            f"{r['question_id']:<10.10} {r['kind'] or '-':<11.11} "
            f"{'yes' if r['correct'] else 'no':<3} {r['llm_calls']:>5} {r['tokens']:>7} "
            f"{r['seconds']:>7.1f}  {_note(r)}"
        )
    lines.append("-" * len(header))
    score = run["score"]
    lines.append(
        f"score: {score['right']}/{score['answered']} right ({score['accuracy']:.0%}; "
        f"95% interval {score['low']:.0%}-{score['high']:.0%}), of {run['total']} questions; "
        f"model {run['model']}, agent {run['agent_type']}, status {run['status']}"
    )
    for kind in run["by_kind"]:
        answered = max(kind["answered"], 1)
        lines.append(
            f"  {kind['kind'] or '-':<11} {kind['right']}/{kind['answered']} right, "
            f"{kind['llm_calls'] / answered:.1f} calls, {kind['tokens'] / answered:,.0f} tokens, "
            f"{kind['seconds'] / answered:.1f} s a question"
        )
    if run.get("error"):
        lines.append(f"error: {run['error']}")
    return "\n".join(lines)


def comparison_table(comparison: dict[str, Any]) -> str:
    """Two runs side by side: each question right or wrong in each."""
    first, second = comparison["first"], comparison["second"]

    def mark(result: dict[str, Any] | None) -> str:
        return "-" if result is None else ("yes" if result["correct"] else "no")

    header = f"{'question':<10} {'type':<11} {'first':<6} {'second':<6}"
    lines = [
        f"first:  {first['id']} {first['model']} ({first['agent_type']})",
        f"second: {second['id']} {second['model']} ({second['agent_type']})",
        header,
        "-" * len(header),
    ]
    for pair in comparison["questions"]:
        lines.append(
            f"{pair['question_id']:<10.10} {pair['kind'] or '-':<11.11} "
            f"{mark(pair['first']):<6} {mark(pair['second']):<6}"
        )
    for label, run in (("first", first), ("second", second)):
        s = run["score"]
        lines.append(f"{label}: {s['right']}/{s['answered']} ({s['low']:.0%}-{s['high']:.0%})")
    return "\n".join(lines)
