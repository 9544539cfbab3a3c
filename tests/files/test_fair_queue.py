"""The conversions' queue takes its owners in turn (backend/files/fair_queue.py)."""

from __future__ import annotations

import threading

from backend.files.fair_queue import FairQueue


def test_owners_take_turns_and_each_keeps_its_order() -> None:
    queue: FairQueue[str] = FairQueue()
    for n in range(4):
        queue.put(1, f"a{n}")
    queue.put(2, "b0")
    queue.put(3, "c0")
    queue.put(2, "b1")
    taken = [queue.get() for _ in range(7)]
    assert taken == ["a0", "b0", "c0", "a1", "b1", "a2", "a3"]


def test_close_wakes_a_waiting_get() -> None:
    queue: FairQueue[str] = FairQueue()
    got: list[str | None] = []
    waiting = threading.Thread(target=lambda: got.append(queue.get()))
    waiting.start()
    queue.close()
    waiting.join(timeout=10)
    assert got == [None]
