"""Append-only JSONL audit logs in DATA_DIR/logs: every tool run and every prompt.

A record that cannot be written (a full disk) is logged as a warning and dropped:
the turn it describes has already been answered and stored.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


class AuditLog:
    def __init__(self, data_dir: Path) -> None:
        self.folder = data_dir / "logs"
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = threading.Lock()

    def _append(self, name: str, record: dict[str, Any]) -> None:
        line = json.dumps({"timestamp": time.time(), **record}, default=str) + "\n"
        try:
            with self._lock, (self.folder / name).open("a") as handle:
                handle.write(line)
        except OSError as exc:
            logger.warning("audit record for %s not written: %s", name, exc)

    def tool_run(self, **record: Any) -> None:
        self._append("tool_runs.jsonl", record)

    def prompt(self, **record: Any) -> None:
        self._append("prompts.jsonl", record)
