"""Session ids, and the keys that namespace them by their owner.

A client names a session (`analysis`); the server stores and runs it under a
*session key*, `u<user id>-<session id>` (`u7-analysis`), so two users who pick
the same name get two sessions, and a key always says whose it is. The key is
what becomes a path (`DATA_DIR/scratch/<key>`), an S3 prefix, a Ray actor's name,
a checkpoint thread and a cache entry; each of those checks it again with
`check_key` before it uses it, whoever the caller. Only the client's part goes
back on the wire (`client_id`).

A key is a `SessionKey`, which only `session_key` makes (and `check_key` re-admits, from
what was stored): mypy then tells a client's session id from its owner's key, at the
boundary between users.
"""

from __future__ import annotations

import re
from typing import NewType

# A session id becomes part of a directory name: no separator, no leading dot, bounded.
SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
_SESSION_ID = re.compile(SESSION_ID_PATTERN)
_KEY = re.compile(r"^u([0-9]{1,18})-([A-Za-z0-9][A-Za-z0-9_.-]{0,127})$")


SessionKey = NewType("SessionKey", str)


class InvalidSession(ValueError):
    """Not a session id (or key) this server issues: callers answer 404 or 422."""


def valid_session_id(session_id: object) -> bool:
    return isinstance(session_id, str) and _SESSION_ID.fullmatch(session_id) is not None


def session_key(user_id: int, session_id: str) -> SessionKey:
    """The key of `user_id`'s session `session_id` (`InvalidSession` for a bad id)."""
    if isinstance(user_id, bool) or not isinstance(user_id, int) or user_id < 0:
        raise InvalidSession(f"user {user_id!r}")
    if not valid_session_id(session_id):
        raise InvalidSession(repr(session_id)[:80])
    return SessionKey(f"u{user_id}-{session_id}")


def valid_key(key: object) -> bool:
    return isinstance(key, str) and _KEY.fullmatch(key) is not None


def _parts(key: object) -> re.Match[str]:
    match = _KEY.fullmatch(key) if isinstance(key, str) else None
    if match is None:
        raise InvalidSession(repr(key)[:80])
    return match


def check_key(key: object) -> SessionKey:
    """`key` if it is a session key, else `InvalidSession`: what every path, prefix,
    actor name and cache entry built from a session goes through."""
    return SessionKey(_parts(key).group(0))


def owner_of(key: SessionKey) -> int:
    """The id of the user whose session `key` is."""
    return int(_parts(key).group(1))


def client_id(key: SessionKey) -> str:
    """The session id its owner chose, as the API shows it."""
    return _parts(key).group(2)


def user_prefix(user_id: int) -> str:
    """What every key of `user_id`'s sessions starts with."""
    return f"u{user_id}-"
