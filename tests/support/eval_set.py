"""A ten-question evaluation set in InfiAgent-DABench's format, and a scripted model that
answers seven of them right (the API, CLI and UI tests of evaluations share them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TABLE = b"region,price\nnorth,10\nsouth,30\neast,20\n"
COUNT = 10
WRONG = {"EVQ08": "@total[999]", "EVQ09": "no closed-form answer", "EVQ10": "@sum[9]"}
RIGHT = COUNT - len(WRONG)


def tag(number: int) -> str:
    return f"EVQ{number:02d}"


def write_dabench(folder: Path) -> Path:
    """questions.jsonl, labels.jsonl and tables/prices.csv in `folder`."""
    (folder / "tables").mkdir(parents=True)
    (folder / "tables" / "prices.csv").write_bytes(TABLE)
    questions, labels = [], []
    for number in range(1, COUNT + 1):
        questions.append(
            {
                "id": number,
                "question": f"{tag(number)}: what is {number} plus the number of rows?",
                "constraints": "Count every row.",
                "format": "@total[value]",
                "file_name": "prices.csv",
                "level": "easy" if number <= 5 else "hard",
            }
        )
        labels.append({"id": number, "common_answers": [["total", str(number + 3)]]})
    (folder / "questions.jsonl").write_text("\n".join(json.dumps(q) for q in questions))
    (folder / "labels.jsonl").write_text("\n".join(json.dumps(label) for label in labels))
    return folder


def replies() -> list[dict[str, Any]]:
    """ReAct turns: each runs code over the table, then answers (right for seven)."""
    script: list[dict[str, Any]] = []
    for number in range(1, COUNT + 1):
        name = tag(number)
        answer = WRONG.get(name, f"@total[{number + 3}]")
        script += [
            {
                "when": ["[stage: react]", name],
                "content": f"Thought: count\nAction: coder\nAction Input: {name} count rows",
                "repeat": True,
            },
            {
                "when": ["[stage: generate]", name],
                "content": f"```python\nprint('{name}', len(df1))\n```",
                "repeat": True,
            },
            {
                "when": ["[stage: answer]", name],
                "content": f"There are 3 rows. {answer}",
                "repeat": True,
            },
        ]
    return script


def import_files(folder: Path) -> list[tuple[str, tuple[str, bytes]]]:
    """The multipart parts of `POST /api/evals/sets` for a DABench folder."""
    parts = [
        ("questions", ("questions.jsonl", (folder / "questions.jsonl").read_bytes())),
        ("labels", ("labels.jsonl", (folder / "labels.jsonl").read_bytes())),
    ]
    return parts + [
        ("tables", (path.name, path.read_bytes())) for path in sorted((folder / "tables").iterdir())
    ]
