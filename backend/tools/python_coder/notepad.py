"""The session notepad: what earlier tasks did, for later prompts to build on.

After a successful task the code is saved as `scripts/<task>_<timestamp>.py` and
`notepad.json` gets an entry: task, summary, code file, variables created. The
sandboxed code can rewrite both files at will, so reading them trusts nothing:
size-capped, schema-checked, and anything malformed is skipped.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

from backend.storage.sessions import SessionKey
from backend.storage.workspaces import Workspaces

NOTEPAD = "notepad.json"
CATALOG = "variables/variables_metadata.json"
_MAX_BYTES = 1024 * 1024
_MAX_ENTRIES = 50
_IN_PROMPT = 5
_FIELDS = ("task", "summary", "code_file", "variables", "timestamp")


def _slug(task: str) -> str:
    words = re.findall(r"[a-z0-9]+", task.lower())[:6]
    return "_".join(words)[:48] or "task"


def read_entries(workspaces: Workspaces, session_id: SessionKey) -> list[dict[str, Any]]:
    data = workspaces.read_json(session_id, NOTEPAD, _MAX_BYTES)
    entries = data.get("entries") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return []
    return [
        {key: entry.get(key) for key in _FIELDS}
        for entry in entries
        if isinstance(entry, dict) and isinstance(entry.get("task"), str)
    ]


def read_variables(workspaces: Workspaces, session_id: SessionKey) -> dict[str, dict[str, Any]]:
    catalog = workspaces.read_json(session_id, CATALOG, _MAX_BYTES)
    if not isinstance(catalog, dict):
        return {}
    return {k: v for k, v in catalog.items() if isinstance(k, str) and isinstance(v, dict)}


def describe_variables(catalog: dict[str, dict[str, Any]]) -> str:
    lines = []
    for name, entry in list(catalog.items())[:30]:
        detail = f"{entry.get('type', '?')}"
        if isinstance(entry.get("shape"), list):
            detail += f" shape={entry['shape']}"
        if isinstance(entry.get("columns"), list):
            detail += f" columns={[str(c) for c in entry['columns'][:20]]}"
        lines.append(f"- {name}: {detail}")
    return "\n".join(lines)


def describe_entries(entries: list[dict[str, Any]]) -> str:
    lines = []
    for entry in entries[-_IN_PROMPT:]:
        variables = entry.get("variables") or []
        names = ", ".join(str(v) for v in variables[:10]) if isinstance(variables, list) else ""
        lines.append(
            f"- {str(entry['task'])[:150]} → {str(entry.get('summary') or '')[:200]}"
            + (f" (variables: {names})" if names else "")
        )
    return "\n".join(lines)


def record_task(
    workspaces: Workspaces,
    session_id: SessionKey,
    *,
    task: str,
    summary: str,
    code: str,
    variables: list[str],
) -> dict[str, Any]:
    """Save the code and append a notepad entry; returns the entry."""
    now = time.time()
    stamp = time.strftime("%Y%m%d_%H%M%S", time.gmtime(now)) + f"_{int(now * 1000) % 1000:03d}"
    code_file = f"scripts/{_slug(task)}_{stamp}.py"
    header = f"# Task: {' '.join(task.split())[:200]}\n# Saved: {stamp} UTC\n\n"
    workspaces.write_file(session_id, code_file, (header + code).encode())
    entry = {
        "task": task,
        "summary": summary,
        "code_file": code_file,
        "variables": variables,
        "timestamp": time.time(),
    }
    entries = [*read_entries(workspaces, session_id), entry][-_MAX_ENTRIES:]
    notepad = json.dumps({"entries": entries}, indent=1, default=str) + "\n"
    workspaces.write_file(session_id, NOTEPAD, notepad.encode())
    return entry
