"""Feedback on answers (`feedback` table): a thumb up or down, with a note, per answer.

An answer has at most one, given by the user whose conversation holds it (a message id
of anyone else's, a question's, or a deleted one is not found). The model is the one
that answered, copied from the answer's metadata when the feedback is given, so counts
per model never trust the client.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any, Literal

from backend.storage.database import Database

Rating = Literal["up", "down"]
_STORED = {"up": 1, "down": -1}
_READ: dict[int, Rating] = {1: "up", -1: "down"}


@dataclass(frozen=True)
class Feedback:
    message_id: int
    rating: Rating
    note: str
    model: str
    updated_at: float


@dataclass(frozen=True)
class FeedbackCounts:
    up: int = 0
    down: int = 0


def _feedback(row: Any) -> Feedback:
    return Feedback(
        message_id=int(row["message_id"]),
        rating=_READ[int(row["rating"])],
        note=str(row["note"]),
        model=str(row["model"]),
        updated_at=float(row["updated_at"]),
    )


class FeedbackRows:
    """The `Store`'s feedback methods, over the SQL store's `database`."""

    database: Database

    def set_feedback(
        self, user_id: int, conversation_id: str, message_id: int, rating: Rating, note: str
    ) -> Feedback | None:
        """Give (or change) the feedback on an answer of the user's; None if there is no
        such answer in that conversation of theirs."""
        now = time.time()
        with self.database.transaction() as db:
            row = db.execute(
                "SELECT m.metadata FROM messages m JOIN conversations c"
                " ON c.id = m.conversation_id"
                " WHERE m.id = ? AND c.id = ? AND c.user_id = ? AND m.role = 'assistant'",
                (message_id, conversation_id, user_id),
            ).fetchone()
            if row is None:
                return None
            model = _model(row["metadata"])
            db.execute(
                "INSERT INTO feedback"
                " (message_id, user_id, rating, note, model, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (message_id) DO UPDATE SET rating = excluded.rating,"
                " note = excluded.note, updated_at = excluded.updated_at",
                (message_id, user_id, _STORED[rating], note, model, now, now),
            )
            stored = db.execute(
                "SELECT * FROM feedback WHERE message_id = ?", (message_id,)
            ).fetchone()
        return _feedback(stored)

    def delete_feedback(self, user_id: int, conversation_id: str, message_id: int) -> bool:
        """Take back the user's feedback on an answer; False if there was none."""
        with self.database.transaction() as db:
            cursor = db.execute(
                "DELETE FROM feedback WHERE message_id = ? AND user_id = ? AND message_id IN"
                " (SELECT m.id FROM messages m WHERE m.conversation_id = ?)",
                (message_id, user_id, conversation_id),
            )
        return bool(cursor.rowcount)

    def feedback_in(self, user_id: int, conversation_id: str) -> dict[int, Feedback]:
        """The user's feedback on the answers of one conversation, by message id."""
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT f.* FROM feedback f JOIN messages m ON m.id = f.message_id"
                " WHERE f.user_id = ? AND m.conversation_id = ?",
                (user_id, conversation_id),
            ).fetchall()
        return {int(row["message_id"]): _feedback(row) for row in rows}

    def feedback_counts(self, user_id: int | None = None) -> dict[str, FeedbackCounts]:
        """Thumbs up and down per model: one user's, or (None) everyone's."""
        where, args = ("WHERE user_id = ?", (user_id,)) if user_id is not None else ("", ())
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT model, SUM(CASE WHEN rating > 0 THEN 1 ELSE 0 END) AS up,"
                " SUM(CASE WHEN rating < 0 THEN 1 ELSE 0 END) AS down"
                f" FROM feedback {where} GROUP BY model ORDER BY model",
                args,
            ).fetchall()
        return {str(r["model"]): FeedbackCounts(int(r["up"]), int(r["down"])) for r in rows}


def _model(metadata: str) -> str:
    try:
        model = json.loads(metadata).get("model")
    except (ValueError, AttributeError):
        return ""
    return model if isinstance(model, str) else ""
