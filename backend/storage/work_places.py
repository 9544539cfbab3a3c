"""The governor's places, per user, shared by the API servers on one database.

Each server bounds its own work (`backend/core/governor.py`); a user's share of a kind
of work must hold across all of them, or a load balancer that spreads one user's
requests multiplies it. So each place a server gives also takes a row here, in one
transaction that first locks the user's row (servers taking places for one user go one
at a time), drops that user's expired places and counts the rest. A row expires past
the work's time limit (plus a grace), so a server that died holding places frees them
by itself; a server that starts deletes the ones its previous life left.
"""

from __future__ import annotations

from backend.storage.database import Database


class WorkPlaceRows:
    """The `Store`'s work place methods, over the SQL store's `database`."""

    database: Database

    def take_work_place(
        self,
        place_id: str,
        kind: str,
        user_id: int,
        server_id: str,
        *,
        per_user: int,
        now: float,
        expires_at: float,
    ) -> bool:
        """A place of `kind` for the user if they hold fewer than `per_user` on all servers."""
        lock = f"SELECT id FROM users WHERE id = ?{self.database.dialect.for_update}"
        with self.database.transaction() as db:
            if db.execute(lock, (user_id,)).fetchone() is None:
                return False  # deleted meanwhile: no more work for them
            db.execute(
                "DELETE FROM work_places WHERE user_id = ? AND expires_at < ?", (user_id, now)
            )
            held = db.execute(
                "SELECT COUNT(*) AS held FROM work_places WHERE user_id = ? AND kind = ?",
                (user_id, kind),
            ).fetchone()["held"]
            if int(held) >= per_user:
                return False
            db.execute(
                "INSERT INTO work_places (id, kind, user_id, server_id, expires_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (place_id, kind, user_id, server_id, expires_at),
            )
        return True

    def release_work_place(self, place_id: str) -> None:
        with self.database.transaction() as db:
            db.execute("DELETE FROM work_places WHERE id = ?", (place_id,))

    def release_server_work_places(self, server_id: str) -> int:
        """Delete every place `server_id` holds (at its start: its last life's)."""
        with self.database.transaction() as db:
            return db.execute("DELETE FROM work_places WHERE server_id = ?", (server_id,)).rowcount
