"""A memory and process budget for a whole sandbox, not just each process in it.

rlimits bound one process; a run that forks 100 children of 500 MB each would
still exhaust the host. A cgroup per sandbox bounds their sum. Both cgroup v1
(memory and pids hierarchies) and v2 (one unified hierarchy) are handled, under
the server's own cgroup. Where neither is writable (not root, no delegation),
sandboxes run with rlimits only, and `available()` says so.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _own_paths() -> dict[str, str]:
    """Controller (or "" for v2) -> this process's cgroup path."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _parents() -> dict[str, Path] | None:
    """Where our sandbox cgroups go: per controller (v1) or unified (v2)."""
    own = _own_paths()
    v1: dict[str, Path] = {
        controller: CGROUP_ROOT / controller / own[controller].lstrip("/") / "sandboxes"
        for controller in ("memory", "pids")
        if controller in own and (CGROUP_ROOT / controller).is_dir()
    }
    if len(v1) == 2:
        return v1
    if "" in own and (CGROUP_ROOT / "cgroup.controllers").exists():
        return {"unified": CGROUP_ROOT / own[""].lstrip("/") / "sandboxes"}
    return None


def cgroup_name(sandbox: str) -> str:
    """A sandbox's cgroup name: it starts with this server's pid, so another server
    on the host can tell whether the cgroup's server is still running."""
    return f"s{os.getpid()}-{sandbox}"


def _server_gone(folder: str) -> bool:
    server, _, _ = folder.partition("-")
    if not (server.startswith("s") and server[1:].isdigit()):
        return True  # named before servers signed theirs: nobody owns it now
    return not Path(f"/proc/{server[1:]}").exists()


def remove_stale() -> int:
    """Delete empty sandbox cgroups left by a server that was killed; returns how many.

    Only those of servers no longer running: another server on this host creates a
    sandbox's cgroup a moment before the sandbox joins it, and removing that empty
    cgroup then would make its sandbox fail to start.
    """
    parents = _parents()
    removed = 0
    for parent in (parents or {}).values():
        with contextlib.suppress(OSError):
            for folder in parent.iterdir():
                if folder.is_dir() and _server_gone(folder.name):
                    with contextlib.suppress(OSError):
                        folder.rmdir()  # fails, as it should, while processes remain
                        removed += 1
    return removed


class SandboxCgroup:
    """One sandbox's cgroup(s); `procs_files()` are what a new process writes its pid to."""

    def __init__(self, name: str, memory_bytes: int, max_pids: int) -> None:
        self.name = name
        self.memory_bytes = memory_bytes
        self.max_pids = max_pids
        self.folders: list[Path] = []

    def create(self) -> bool:
        """Create (or re-create) the cgroups with their limits; False if impossible here."""
        self.folders = []
        parents = _parents()
        if parents is None:
            return False
        try:
            if "unified" in parents:
                self._create_v2(parents["unified"])
            else:
                self._create_v1(parents["memory"], parents["pids"])
        except OSError as exc:
            logger.warning("No cgroup for sandbox %s (%s); rlimits only", self.name, exc)
            self.remove()
            return False
        return True

    def _create_v1(self, memory_parent: Path, pids_parent: Path) -> None:
        memory = memory_parent / self.name
        pids = pids_parent / self.name
        for folder in (memory, pids):
            folder.mkdir(parents=True, exist_ok=True)
            self.folders.append(folder)
        (memory / "memory.limit_in_bytes").write_text(str(self.memory_bytes))
        with contextlib.suppress(OSError):  # absent without swap accounting
            (memory / "memory.memsw.limit_in_bytes").write_text(str(self.memory_bytes))
        (pids / "pids.max").write_text(str(self.max_pids))

    def _create_v2(self, parent: Path) -> None:
        parent.mkdir(parents=True, exist_ok=True)
        (parent / "cgroup.subtree_control").write_text("+memory +pids")
        folder = parent / self.name
        folder.mkdir(exist_ok=True)
        self.folders.append(folder)
        (folder / "memory.max").write_text(str(self.memory_bytes))
        with contextlib.suppress(OSError):
            (folder / "memory.swap.max").write_text("0")
        (folder / "pids.max").write_text(str(self.max_pids))

    def oom_kills(self) -> int:
        """How many of its processes the kernel has killed for its memory limit (0 if
        unknown): `oom_kill` in memory.events (v2) or memory.oom_control (v1)."""
        for folder in self.folders:
            for name in ("memory.events", "memory.oom_control"):
                try:
                    lines = (folder / name).read_text().splitlines()
                except OSError:
                    continue
                for line in lines:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip().isdigit():
                        return int(value)
        return 0

    def procs_files(self) -> list[str]:
        return [str(folder / "cgroup.procs") for folder in self.folders]

    def remove(self) -> None:
        """Delete the cgroups; those still holding processes are kept for a retry."""
        remaining = []
        for folder in self.folders:
            try:
                folder.rmdir()
            except FileNotFoundError:
                pass
            except OSError:
                remaining.append(folder)
        self.folders = remaining


def writable() -> bool:
    """Whether sandboxes get a cgroup here: one is made and removed as a probe."""
    probe = SandboxCgroup(cgroup_name("probe"), memory_bytes=64 * 1024 * 1024, max_pids=8)
    made = probe.create()
    probe.remove()
    return made
