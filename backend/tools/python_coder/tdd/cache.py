"""Solved TDD tasks on disk, keyed by what produced them.

The key is a hash of the instruction, the model and the generation settings,
so a hit is a solution that this model, asked the same thing the same way,
already produced and verified. Each user has a cache of their own
(`user_cache_dir`): a solution was verified in its author's sandbox, and it lands
in the exported notebook of whoever gets it, so it is never handed to another user.
Only solutions whose tests all passed are stored: a failed attempt may succeed next
time, and a hit must never hand back code known to be wrong.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from backend.tools.python_coder.tdd.models import TDDSolution

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1


TDD_CACHE = "tdd_cache"  # under DATA_DIR


def user_cache_dir(root: Path, user_id: int) -> Path:
    """`user_id`'s own folder of solutions under the cache `root`."""
    if isinstance(user_id, bool) or not isinstance(user_id, int) or user_id < 0:
        raise ValueError(f"not a user id: {user_id!r}")
    return root / f"u{user_id}"


def cache_key(instruction: str, model: str, settings: dict[str, Any]) -> str:
    identity = {
        "instruction": instruction,
        "model": model,
        "settings": settings,
        "version": FORMAT_VERSION,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def load_solution(cache_dir: Path, key: str) -> TDDSolution | None:
    """The stored solution, or None if there is none (or it is unreadable)."""
    path = cache_dir / f"{key}.json"
    try:
        # json.loads, not pydantic's parser: test values may hold NaN.
        return TDDSolution.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, ValidationError) as exc:
        logger.warning("Ignoring the unreadable TDD cache entry %s: %s", path, exc)
        return None


def save_solution(cache_dir: Path, key: str, solution: TDDSolution) -> None:
    """Store `solution` atomically, readable by the server's user only."""
    cache_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    text = json.dumps(solution.model_dump(), ensure_ascii=False)
    handle, temporary = tempfile.mkstemp(dir=cache_dir, prefix=".", suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, cache_dir / f"{key}.json")
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
