"""Login throttling: failed logins back off exponentially, per (user, address) and per address.

After `free` failures in a row a key is locked for `base` seconds, doubling with
each further failure up to `cap`, so a guessing script slows to one try every few
minutes while a person who mistyped waits a second. The keys are a user name *from
one address* (guesses at one account) and the address alone (one address trying
many names). A user name alone is never a key: whoever fails on purpose locks only
their own address out, never the owner signing in from theirs. A successful login
clears both of its keys; a guess at another account stays counted under its own
(user, address) key. The lock never exceeds `cap`, so nobody is locked out for good.
The counts live in the store, so every API server on one database sees them, and a
restart does not forget them; a key with no failure for a day is forgotten.

The address is the client socket's, or the one a trusted proxy (TRUSTED_PROXIES)
forwarded: a client cannot pick a fresh one for each guess.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

from backend.storage import Store

FORGET_AFTER = 24 * 3600.0  # seconds without a failure


class LoginKeys(NamedTuple):
    pair: str  # this user name from this address
    address: str  # this address, whatever the user name


def login_keys(username: str, address: str | None) -> LoginKeys:
    where = address or "unknown"
    return LoginKeys(f"user:{username.strip().lower()}@{where}", f"addr:{where}")


class LoginThrottle:
    def __init__(self, store: Store, free: int = 5, base: float = 1.0, cap: float = 900.0) -> None:
        self.store = store
        self.free = free
        self.base = base
        self.cap = cap

    def retry_after(self, *keys: str) -> int:
        """Seconds until all `keys` may try again (0: now)."""
        return max(0, math.ceil(self.store.locked_until(keys) - time.time()))

    def failed(self, *keys: str) -> None:
        now = time.time()
        for key in keys:
            over = self.store.count_login_failure(key, now, now - FORGET_AFTER) - self.free
            if over > 0:
                self.store.lock_login(key, now + min(self.cap, self.base * 2 ** (over - 1)))

    def succeeded(self, *keys: str) -> None:
        self.store.clear_login_failures(keys)
