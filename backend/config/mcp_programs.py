"""MCP_STDIO_PROGRAMS read: each program an admin may run, with the arguments the operator
pinned for it.

Two spellings. A JSON object maps each program's absolute path to its whole argument
list, e.g. `{"/opt/mcp/bin/mcp-server-sqlite": ["--db-path", "/srv/shop.db"]}`. A
comma-separated list of absolute paths (the older form) allows each program with no
arguments at all. An admin's command is then that program with exactly those arguments:
an admin's token alone must not choose what the program reads (`--db-path ../../app.db`).
"""

from __future__ import annotations

import json
import os

PinnedPrograms = dict[str, tuple[str, ...]]

_MAX_ARGUMENTS = 64


def pinned_programs(value: str) -> PinnedPrograms:
    """Each allowed program's absolute path and its pinned arguments (ValueError if bad)."""
    text = value.strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            given = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"is not valid JSON: {exc.msg}") from None
        if not isinstance(given, dict):
            raise ValueError("must map each program's path to its list of arguments")
        programs = {}
        for program, arguments in given.items():
            if not isinstance(arguments, list) or not all(isinstance(a, str) for a in arguments):
                raise ValueError(f"the arguments of {program!r} must be a list of strings")
            if len(arguments) > _MAX_ARGUMENTS:
                raise ValueError(f"{program!r} has more than {_MAX_ARGUMENTS} arguments")
            programs[program] = tuple(arguments)
    else:
        programs = {p.strip(): () for p in text.split(",") if p.strip()}
    for program in programs:
        if not os.path.isabs(program) or "\x00" in program:
            raise ValueError(f"{program!r} is not an absolute path")
    return programs
