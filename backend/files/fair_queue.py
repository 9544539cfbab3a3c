"""A blocking queue that takes its owners in turn: each `get` serves the next owner with
work waiting, first come first served within an owner. One owner's thousand items wait
behind each other, never in front of another owner's one."""

from __future__ import annotations

import collections
import threading
from typing import Generic, TypeVar

T = TypeVar("T")


class FairQueue(Generic[T]):
    def __init__(self) -> None:
        self._items: dict[int, collections.deque[T]] = {}
        self._turns: collections.deque[int] = collections.deque()  # owners with work waiting
        self._ready = threading.Condition()
        self._closed = False

    def put(self, owner: int, item: T) -> None:
        with self._ready:
            if owner not in self._items:
                self._items[owner] = collections.deque()
                self._turns.append(owner)
            self._items[owner].append(item)
            self._ready.notify()

    def get(self) -> T | None:
        """The next owner's next item, waiting for one; None once closed."""
        with self._ready:
            while not self._turns and not self._closed:
                self._ready.wait()
            if self._closed:
                return None
            owner = self._turns.popleft()
            waiting = self._items[owner]
            item = waiting.popleft()
            if waiting:
                self._turns.append(owner)  # their next item waits for everyone else's turn
            else:
                del self._items[owner]
            return item

    def close(self) -> None:
        """Wake every `get` with None; what waits is dropped."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
