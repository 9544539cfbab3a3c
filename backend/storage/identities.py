"""Users signed in through OpenID Connect (`user_identities`): an identity provider's
issuer and subject name one user, for good (a changed email or name is not a new user)."""

from __future__ import annotations

import time

from backend.storage.database import Database


class IdentityTaken(Exception):
    """This issuer and subject already name a user."""


class IdentityRows:
    """The `Store`'s identity methods, over the SQL store's `database`."""

    database: Database

    def user_id_for_identity(self, issuer: str, subject: str) -> int | None:
        with self.database.reading() as db:
            row = db.execute(
                "SELECT user_id FROM user_identities WHERE issuer = ? AND subject = ?",
                (issuer, subject),
            ).fetchone()
        return int(row["user_id"]) if row else None

    def link_identity(self, user_id: int, issuer: str, subject: str) -> None:
        """Raises `IdentityTaken` (or when the user is gone)."""
        try:
            with self.database.transaction() as db:
                db.execute(
                    "INSERT INTO user_identities (issuer, subject, user_id, created_at)"
                    " VALUES (?, ?, ?, ?)",
                    (issuer, subject, user_id, time.time()),
                )
        except self.database.integrity_errors:
            raise IdentityTaken(f"{issuer} {subject}") from None
