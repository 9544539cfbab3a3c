"""How a stdio MCP server's program is started: where, with what, and seeing what.

Each start gets a scratch folder of its own (its working folder, HOME and TMPDIR)
under a temporary folder the server owns, outside DATA_DIR, removed when it stops.
Where the sandbox's bubblewrap works, the program runs in it without a view of
DATA_DIR or the database (`program_command`); where it does not (SANDBOX=none), it
runs as the server's user with the same environment and working folder, and could
read what that user can: docs/security.md says so.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from mcp.client.stdio import StdioServerParameters

from backend.tools.mcp_client.environment import INHERITED, program_environment
from backend.tools.sandbox.command import program_command


@dataclass
class ProgramBounds:
    """What every stdio server's program is held to on this server."""

    hidden: tuple[Path, ...] = ()  # DATA_DIR and the like: never seen by the program
    confine: bool = False  # in bubblewrap (it works here and SANDBOX is not `none`)
    _root: Path | None = field(default=None, init=False)

    def scratch(self, label: str) -> Path:
        """A new, empty folder for one start of a program (mode 0700)."""
        if self._root is None or not self._root.is_dir():
            self._root = Path(tempfile.mkdtemp(prefix="pda-mcp-servers-"))
        return Path(tempfile.mkdtemp(prefix=f"{label}-", dir=self._root))

    def parameters(
        self, command: Sequence[str], secrets: Mapping[str, str], scratch: Path
    ) -> StdioServerParameters:
        """The SDK's parameters for `command` (raises `RefusedSecret`)."""
        env = program_environment(secrets, scratch)
        if self.confine:
            argv = program_command(command, scratch=scratch, hidden=self.hidden, unset=INHERITED)
        else:
            unset = [flag for name in INHERITED for flag in ("-u", name)]
            argv = [shutil.which("env") or "/usr/bin/env", *unset, "--", *command]
        return StdioServerParameters(command=argv[0], args=argv[1:], env=env, cwd=scratch)

    def close(self) -> None:
        """Remove every scratch folder (the server's shutdown)."""
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None


def hidden_paths(data_dir: Path, database_url: str) -> tuple[Path, ...]:
    """DATA_DIR, and a SQLite database kept elsewhere with its side files, at their
    paths as given and as resolved."""
    folders = _forms(data_dir)
    found = list(folders)
    sqlite = "sqlite:///"
    if database_url.startswith(sqlite) and database_url != sqlite + ":memory:":
        database = Path(database_url.removeprefix(sqlite))
        for side in ("", "-wal", "-shm", "-journal"):
            for form in _forms(database.with_name(database.name + side)):
                if form not in found and not any(form.is_relative_to(f) for f in folders):
                    found.append(form)
    return tuple(found)


def _forms(path: Path) -> list[Path]:
    """`path` made absolute, and resolved when that differs (a link on the way)."""
    absolute, resolved = Path(os.path.abspath(path)), path.resolve()
    return [absolute] if absolute == resolved else [absolute, resolved]
