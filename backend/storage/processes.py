"""Whether a process of this host still runs: for folders named after the server that made them."""

from __future__ import annotations

import os


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: running
    return True
