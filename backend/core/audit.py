"""Append-only JSONL audit logs in DATA_DIR/logs: every tool run and every prompt."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any


class AuditLog:
    def __init__(self, data_dir: Path) -> None:
        self.folder = data_dir / "logs"
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = threading.Lock()

    def _append(self, name: str, record: dict[str, Any]) -> None:
        line = json.dumps({"timestamp": time.time(), **record}, default=str) + "\n"
        with self._lock, (self.folder / name).open("a") as handle:
            handle.write(line)

    def tool_run(self, **record: Any) -> None:
        self._append("tool_runs.jsonl", record)

    def prompt(self, **record: Any) -> None:
        self._append("prompts.jsonl", record)
