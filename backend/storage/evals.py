"""Evaluations' rows: a user's question sets (`eval_sets`), their runs (`eval_runs`) and
each question's result (`eval_results`).

Every read and write names the user: another user's set or run is as unknown as a
missing one. A set's questions and a result's details are JSON the evaluation code
(backend/core/evals) writes and reads; this module only keeps them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from backend.storage.database import Database


@dataclass(frozen=True)
class EvalSetRow:
    id: str
    user_id: int
    name: str
    source: str
    questions: list[dict[str, Any]]
    created_at: float


@dataclass(frozen=True)
class EvalRunRow:
    id: str
    user_id: int
    set_id: str
    set_name: str
    model: str
    agent_type: str
    status: str
    total: int
    error: str
    created_at: float
    finished_at: float | None
    done: int = 0
    correct: int = 0


@dataclass(frozen=True)
class EvalResultRow:
    question_id: str
    position: int
    correct: bool
    details: dict[str, Any]
    stopped: bool = False  # the run was stopped before it was answered: not in the score


def _set(row: Any) -> EvalSetRow:
    return EvalSetRow(
        id=str(row["id"]),
        user_id=int(row["user_id"]),
        name=str(row["name"]),
        source=str(row["source"]),
        questions=json.loads(row["questions"]),
        created_at=float(row["created_at"]),
    )


def _run(row: Any) -> EvalRunRow:
    finished = row["finished_at"]
    return EvalRunRow(
        id=str(row["id"]),
        user_id=int(row["user_id"]),
        set_id=str(row["set_id"]),
        set_name=str(row["set_name"]),
        model=str(row["model"]),
        agent_type=str(row["agent_type"]),
        status=str(row["status"]),
        total=int(row["total"]),
        error=str(row["error"]),
        created_at=float(row["created_at"]),
        finished_at=float(finished) if finished is not None else None,
        done=int(row["done"] or 0),
        correct=int(row["correct"] or 0),
    )


# A question the run was stopped in is not counted: it was never answered.
_RUNS = (
    "SELECT r.*, (SELECT COUNT(*) FROM eval_results x WHERE x.run_id = r.id"
    " AND x.stopped = 0) AS done,"
    " (SELECT SUM(x.correct) FROM eval_results x WHERE x.run_id = r.id AND x.stopped = 0)"
    " AS correct FROM eval_runs r"
)


class EvalRows:
    """The `Store`'s evaluation methods, over the SQL store's `database`."""

    database: Database

    def add_eval_set(
        self, user_id: int, set_id: str, name: str, source: str, questions: list[dict[str, Any]]
    ) -> EvalSetRow:
        now = time.time()
        with self.database.transaction() as db:
            db.execute(
                "INSERT INTO eval_sets (id, user_id, name, source, questions, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (set_id, user_id, name, source, json.dumps(questions), now),
            )
        return EvalSetRow(set_id, user_id, name, source, questions, now)

    def get_eval_set(self, user_id: int, set_id: str) -> EvalSetRow | None:
        with self.database.reading() as db:
            row = db.execute(
                "SELECT * FROM eval_sets WHERE id = ? AND user_id = ?", (set_id, user_id)
            ).fetchone()
        return _set(row) if row is not None else None

    def list_eval_sets(self, user_id: int) -> list[EvalSetRow]:
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT * FROM eval_sets WHERE user_id = ? ORDER BY created_at DESC, id",
                (user_id,),
            ).fetchall()
        return [_set(row) for row in rows]

    def delete_eval_set(self, user_id: int, set_id: str) -> bool:
        """The set and its runs' rows (their conversations are the caller's to delete)."""
        with self.database.transaction() as db:
            db.execute(
                "DELETE FROM eval_results WHERE run_id IN"
                " (SELECT id FROM eval_runs WHERE set_id = ? AND user_id = ?)",
                (set_id, user_id),
            )
            db.execute("DELETE FROM eval_runs WHERE set_id = ? AND user_id = ?", (set_id, user_id))
            cursor = db.execute(
                "DELETE FROM eval_sets WHERE id = ? AND user_id = ?", (set_id, user_id)
            )
        return bool(cursor.rowcount)

    def add_eval_run(
        self,
        user_id: int,
        run_id: str,
        eval_set: EvalSetRow,
        model: str,
        agent_type: str,
        server_id: str,
    ) -> EvalRunRow:
        with self.database.transaction() as db:
            db.execute(
                "INSERT INTO eval_runs (id, user_id, set_id, set_name, model, agent_type,"
                " status, total, server_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?)",
                (run_id, user_id, eval_set.id, eval_set.name, model, agent_type,
                 len(eval_set.questions), server_id, time.time()),
            )  # fmt: skip
        made = self.get_eval_run(user_id, run_id)
        assert made is not None  # just written
        return made

    def get_eval_run(self, user_id: int, run_id: str) -> EvalRunRow | None:
        with self.database.reading() as db:
            row = db.execute(
                f"{_RUNS} WHERE r.id = ? AND r.user_id = ?", (run_id, user_id)
            ).fetchone()
        return _run(row) if row is not None else None

    def list_eval_runs(self, user_id: int) -> list[EvalRunRow]:
        with self.database.reading() as db:
            rows = db.execute(
                f"{_RUNS} WHERE r.user_id = ? ORDER BY r.created_at DESC, r.id", (user_id,)
            ).fetchall()
        return [_run(row) for row in rows]

    def set_eval_run_status(
        self, run_id: str, status: str, error: str = "", *, finished: bool = False
    ) -> None:
        with self.database.transaction() as db:
            db.execute(
                "UPDATE eval_runs SET status = ?, error = ?, finished_at = ? WHERE id = ?",
                (status, error, time.time() if finished else None, run_id),
            )

    def add_eval_result(
        self,
        run_id: str,
        question_id: str,
        position: int,
        correct: bool,
        details: dict[str, Any],
        *,
        stopped: bool = False,
    ) -> None:
        with self.database.transaction() as db:
            db.execute(
                "INSERT INTO eval_results"
                " (run_id, question_id, position, correct, stopped, details)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (run_id, question_id) DO UPDATE SET"
                " correct = excluded.correct, stopped = excluded.stopped,"
                " details = excluded.details",
                (run_id, question_id, position, int(correct), int(stopped), json.dumps(details)),
            )

    def eval_results(self, user_id: int, run_id: str) -> list[EvalResultRow]:
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT x.* FROM eval_results x JOIN eval_runs r ON r.id = x.run_id"
                " WHERE x.run_id = ? AND r.user_id = ? ORDER BY x.position",
                (run_id, user_id),
            ).fetchall()
        return [
            EvalResultRow(
                str(row["question_id"]),
                int(row["position"]),
                bool(row["correct"]),
                json.loads(row["details"]),
                bool(row["stopped"]),
            )
            for row in rows
        ]

    def delete_eval_run(self, user_id: int, run_id: str) -> bool:
        with self.database.transaction() as db:
            db.execute(
                "DELETE FROM eval_results WHERE run_id IN"
                " (SELECT id FROM eval_runs WHERE id = ? AND user_id = ?)",
                (run_id, user_id),
            )
            cursor = db.execute(
                "DELETE FROM eval_runs WHERE id = ? AND user_id = ?", (run_id, user_id)
            )
        return bool(cursor.rowcount)

    def interrupt_eval_runs(self, server_id: str) -> int:
        """This server's runs that a stop cut off: `interrupted` (their results stay)."""
        with self.database.transaction() as db:
            cursor = db.execute(
                "UPDATE eval_runs SET status = 'interrupted', finished_at = ?,"
                " error = 'The server stopped during the run.'"
                " WHERE server_id = ? AND status IN ('queued', 'running')",
                (time.time(), server_id),
            )
        return int(cursor.rowcount or 0)
