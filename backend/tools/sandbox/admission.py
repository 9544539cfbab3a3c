"""Which warm sandboxes must stop before another may start: per-user and host caps.

A warm sandbox holds a worker with the session's variables, up to its memory limit.
Each user may keep `user_max(owner)` of them and the host `host_max`. A new one
first stops the owner's least recently used *idle* sandbox, then, past the host's
cap, the host's; a stopped sandbox loses nothing, its variables are on disk, as
after the idle reaper. When the cap is filled by sandboxes running code, the new
one is refused (`SandboxRefused`, a 429) rather than made to wait.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from backend.storage.sessions import SessionKey, owner_of


class SandboxRefused(Exception):
    """No sandbox may start now: every one the cap allows is running code."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = retry_after


class WarmSandbox(Protocol):
    @property
    def last_used(self) -> float: ...

    @property
    def busy(self) -> bool: ...


@dataclass(frozen=True)
class SandboxCaps:
    host_max: int
    user_max: Callable[[int], int]  # the owner's USER_MAX_SANDBOXES, or an admin's override
    retry_after: float  # seconds a busy sandbox may stay busy: a run's time limit

    def to_stop(self, key: SessionKey, warm: Mapping[SessionKey, WarmSandbox]) -> list[SessionKey]:
        """The warm sandboxes (keys) to stop so that `key`'s may start, or `SandboxRefused`."""
        others = {other: sandbox for other, sandbox in warm.items() if other != key}
        owner = owner_of(key)
        limit = self.user_max(owner)
        mine = [other for other in others if owner_of(other) == owner]
        stop = _idle_first(others, mine, len(mine) + 1 - limit)
        if stop is None:
            raise SandboxRefused(
                f"All {len(mine)} of your sandboxes are running code (at most {limit} at once, "
                "USER_MAX_SANDBOXES): wait for one of your runs to finish, then try again.",
                self.retry_after,
            )
        rest = [other for other in others if other not in stop]
        more = _idle_first(others, rest, len(rest) + 1 - self.host_max)
        if more is None:
            raise SandboxRefused(
                f"The server's {self.host_max} sandboxes are all running code "
                "(HOST_MAX_SANDBOXES): try again in a moment.",
                self.retry_after,
            )
        return stop + more


def _idle_first(
    sandboxes: Mapping[SessionKey, WarmSandbox], among: list[SessionKey], count: int
) -> list[SessionKey] | None:
    """The `count` least recently used idle ones of `among`; None if too few are idle."""
    if count <= 0:
        return []
    idle = sorted(
        (key for key in among if not sandboxes[key].busy), key=lambda k: sandboxes[k].last_used
    )
    return idle[:count] if len(idle) >= count else None
