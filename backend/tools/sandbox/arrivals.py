"""What the server moved into the workspace while a run went on (the sandbox's side).

The server announces each move-in (an upload, a Parquet copy) in its staging folder
before it makes it (`backend/storage/drafts.py`); the sandbox sees those records
read-only. Runs in the sandbox worker: standard library only.
"""

from __future__ import annotations

import json
import os

MAX_ARRIVALS = 10_000


def with_server_moves(
    folder: str, before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]
) -> dict[str, tuple[int, int]]:
    """`before`, plus the files the server moved in while the run went on, as they are now.

    A run is judged only on what it wrote: an upload or a Parquet copy that landed
    meanwhile is not listed as its file, nor counted against its limits, nor undone
    with it. The server records each move-in in `folder` before it makes it (read-only
    to the sandbox).
    """
    moved = dict(before)
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".json")][:MAX_ARRIVALS]
    except OSError:
        return moved
    for name in names:
        try:
            with open(os.path.join(folder, name), "rb") as handle:
                record = json.loads(handle.read(4096))
            mark = (int(record["mtime_ns"]), int(record["size"]))
            path = str(record["path"])
        except (OSError, ValueError, TypeError, KeyError):
            continue
        if after.get(path) == mark:
            moved[path] = mark
    return moved
