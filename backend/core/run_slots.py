"""Each user's agent turns in progress, counted over every route that starts one.

A turn takes a slot before anything of it is stored, and gives it back however it
ends (its events' `finally`: done, error, cancel or disconnect). A turn whose events
are never read gives it back when it is collected.
"""

from __future__ import annotations

import weakref
from collections import Counter


class RunSlot:
    """One turn's place among its user's; `release` is idempotent."""

    def __init__(self, slots: RunSlots, user_id: int) -> None:
        self._slots: RunSlots | None = slots
        self.user_id = user_id

    def release(self) -> None:
        slots, self._slots = self._slots, None
        if slots is not None:
            slots.give_back(self.user_id)

    def release_with(self, owner: object) -> None:
        """Release when `owner` is garbage collected, if nothing released it before."""
        weakref.finalize(owner, self.release)


class RunSlots:
    def __init__(self) -> None:
        self._held: Counter[int] = Counter()

    def held(self, user_id: int) -> int:
        return self._held[user_id]

    def total(self) -> int:
        """Every user's turns in progress (the metrics' run queue)."""
        return sum(self._held.values())

    def take(self, user_id: int, limit: int) -> RunSlot | None:
        """A slot for one more of the user's turns, or None with `limit` already going."""
        if self._held[user_id] >= limit:
            return None
        self._held[user_id] += 1
        return RunSlot(self, user_id)

    def give_back(self, user_id: int) -> None:
        self._held[user_id] -= 1
        if self._held[user_id] <= 0:
            del self._held[user_id]
