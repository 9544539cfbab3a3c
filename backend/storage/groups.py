"""Groups of users (`user_groups`, `user_group_members`): each carries limits, the models
its members may use and the MCP servers they may use.

A membership has an origin: an admin's (`admin`), or the identity provider's group claim
(`claim`), which each single sign-on replaces as a whole; so a group the provider stops
naming is left at the next sign-in, while an admin's membership stays until an admin ends it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from backend.storage.database import Connection, Database
from backend.storage.limit_values import LIMIT_COLUMNS, UserLimits, limits_from_row

Origin = Literal["admin", "claim"]
# Group names as ID-token claims carry them: readable, and safe as a label anywhere.
GROUP_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9 _.@:/-]{0,99}$"


@dataclass(frozen=True)
class Group:
    id: int
    name: str
    description: str
    limits: UserLimits  # None: this group has no say on that limit
    models: list[str] | None  # the models its members may use; None: every model
    mcp_server_ids: list[int] | None  # the MCP servers they may use; None: every one
    created_at: float


@dataclass(frozen=True)
class Membership:
    user_id: int
    origin: Origin


class GroupNameTaken(Exception):
    """Another group has this name."""


# What a create or an update writes (lists as JSON text, NULL for "every").
_FIELDS = ("name", "description", *LIMIT_COLUMNS, "models", "mcp_server_ids")


def _stored(field: str, value: Any) -> Any:
    if field == "models":
        return None if value is None else json.dumps(sorted(set(value)))
    if field == "mcp_server_ids":
        return None if value is None else json.dumps(sorted({int(v) for v in value}))
    return value


def _group(row: Any) -> Group:
    models, servers = row["models"], row["mcp_server_ids"]
    return Group(
        id=int(row["id"]),
        name=row["name"],
        description=row["description"],
        limits=limits_from_row(row),
        models=None if models is None else list(json.loads(models)),
        mcp_server_ids=None if servers is None else [int(s) for s in json.loads(servers)],
        created_at=row["created_at"],
    )


class GroupRows:
    """The `Store`'s group methods, over the SQL store's `database`."""

    database: Database

    def list_groups(self) -> list[Group]:
        with self.database.reading() as db:
            rows = db.execute("SELECT * FROM user_groups ORDER BY name").fetchall()
        return [_group(row) for row in rows]

    def get_group(self, group_id: int) -> Group | None:
        with self.database.reading() as db:
            row = db.execute("SELECT * FROM user_groups WHERE id = ?", (group_id,)).fetchone()
        return _group(row) if row else None

    def create_group(self, **fields: Any) -> Group:
        """`fields`: any of `_FIELDS` (`name` at least). Raises `GroupNameTaken`."""
        given = [f for f in _FIELDS if f in fields]
        try:
            with self.database.transaction() as db:
                row = db.execute(
                    f"INSERT INTO user_groups ({', '.join(given)}, created_at)"
                    f" VALUES ({', '.join('?' for _ in given)}, ?) RETURNING *",
                    (*(_stored(f, fields[f]) for f in given), time.time()),
                ).fetchone()
        except self.database.integrity_errors:
            raise GroupNameTaken(fields["name"]) from None
        return _group(row)

    def update_group(self, group_id: int, **fields: Any) -> Group | None:
        """Set the given `_FIELDS`; None when there is no such group. Raises `GroupNameTaken`."""
        changed = [f for f in _FIELDS if f in fields]
        try:
            with self.database.transaction() as db:
                if changed:
                    db.execute(
                        f"UPDATE user_groups SET {', '.join(f'{f} = ?' for f in changed)}"
                        " WHERE id = ?",
                        (*(_stored(f, fields[f]) for f in changed), group_id),
                    )
                row = db.execute("SELECT * FROM user_groups WHERE id = ?", (group_id,)).fetchone()
        except self.database.integrity_errors:
            raise GroupNameTaken(fields.get("name", "")) from None
        return _group(row) if row else None

    def delete_group(self, group_id: int) -> bool:
        with self.database.transaction() as db:
            return db.execute("DELETE FROM user_groups WHERE id = ?", (group_id,)).rowcount > 0

    def group_members(self, group_id: int) -> list[Membership]:
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT user_id, origin FROM user_group_members WHERE group_id = ?"
                " ORDER BY user_id, origin",
                (group_id,),
            ).fetchall()
        return [Membership(int(row["user_id"]), row["origin"]) for row in rows]

    def memberships(self, user_id: int | None = None) -> list[tuple[int, Membership]]:
        """(group id, membership) of one user, or of everyone (None)."""
        where, params = ("WHERE user_id = ?", (user_id,)) if user_id is not None else ("", ())
        with self.database.reading() as db:
            rows = db.execute(
                f"SELECT group_id, user_id, origin FROM user_group_members {where}"
                " ORDER BY group_id, user_id, origin",
                params,
            ).fetchall()
        return [(int(r["group_id"]), Membership(int(r["user_id"]), r["origin"])) for r in rows]

    def groups_of(self, user_id: int) -> list[Group]:
        """The groups `user_id` is a member of, by either origin, by name."""
        with self.database.reading() as db:
            rows = db.execute(
                "SELECT * FROM user_groups WHERE id IN"
                " (SELECT group_id FROM user_group_members WHERE user_id = ?) ORDER BY name",
                (user_id,),
            ).fetchall()
        return [_group(row) for row in rows]

    def add_group_member(self, group_id: int, user_id: int, origin: Origin = "admin") -> bool:
        """False when the group or the user does not exist."""
        try:
            with self.database.transaction() as db:
                _add_member(db, group_id, user_id, origin)
        except self.database.integrity_errors:
            return False
        return True

    def remove_group_member(self, group_id: int, user_id: int) -> bool:
        """End the membership, whatever its origin (a claimed one comes back at the user's
        next sign-in if the provider still names the group); False if there was none."""
        with self.database.transaction() as db:
            return (
                db.execute(
                    "DELETE FROM user_group_members WHERE group_id = ? AND user_id = ?",
                    (group_id, user_id),
                ).rowcount
                > 0
            )

    def sync_claimed_groups(self, user_id: int, names: Sequence[str]) -> list[Group]:
        """Make the user's claimed memberships exactly the groups `names`, creating those
        that do not exist yet (with no limits or rights of their own); their groups after."""
        with self.database.transaction() as db:
            db.execute(
                "DELETE FROM user_group_members WHERE user_id = ? AND origin = 'claim'",
                (user_id,),
            )
            for name in sorted(set(names)):
                db.execute(
                    "INSERT INTO user_groups (name, created_at) VALUES (?, ?)"
                    " ON CONFLICT (name) DO NOTHING",
                    (name, time.time()),
                )
                row = db.execute("SELECT id FROM user_groups WHERE name = ?", (name,)).fetchone()
                _add_member(db, int(row["id"]), user_id, "claim")
        return self.groups_of(user_id)


def _add_member(db: Connection, group_id: int, user_id: int, origin: Origin) -> None:
    db.execute(
        "INSERT INTO user_group_members (group_id, user_id, origin) VALUES (?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        (group_id, user_id, origin),
    )
