"""Login throttling: failed logins back off exponentially, per user name and per address.

After `free` failures in a row a key (a user name, a client address) is locked
for `base` seconds, doubling with each further failure up to `cap`, so a
guessing script slows to one try every few minutes while a person who mistyped
waits a second. A successful login clears both of its keys. The lock never
exceeds `cap`, so nobody (the admin included) is locked out for good; an
attacker who fails on purpose can only delay a user by that much. State is per
process and bounded (least recently failed keys are forgotten first).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

MAX_KEYS = 10_000


@dataclass
class _Failures:
    count: int
    locked_until: float


class LoginThrottle:
    def __init__(self, free: int = 5, base: float = 1.0, cap: float = 900.0) -> None:
        self.free = free
        self.base = base
        self.cap = cap
        self._keys: OrderedDict[str, _Failures] = OrderedDict()
        self._lock = threading.Lock()

    def retry_after(self, *keys: str) -> int:
        """Seconds until all `keys` may try again (0: now)."""
        now = time.monotonic()
        with self._lock:
            waits = [f.locked_until - now for k in keys if (f := self._keys.get(k)) is not None]
        return max(0, math.ceil(max(waits, default=0)))

    def failed(self, *keys: str) -> None:
        now = time.monotonic()
        with self._lock:
            for key in keys:
                failures = self._keys.pop(key, None) or _Failures(0, now)
                failures.count += 1
                over = failures.count - self.free
                if over > 0:
                    failures.locked_until = now + min(self.cap, self.base * 2 ** (over - 1))
                self._keys[key] = failures
            while len(self._keys) > MAX_KEYS:
                self._keys.popitem(last=False)

    def succeeded(self, *keys: str) -> None:
        with self._lock:
            for key in keys:
                self._keys.pop(key, None)


def login_keys(username: str, address: str | None) -> tuple[str, ...]:
    return (f"user:{username.strip().lower()}", f"addr:{address or 'unknown'}")
