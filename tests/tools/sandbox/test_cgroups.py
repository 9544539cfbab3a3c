"""Sandbox cgroups on a host that runs several servers (or restarts one)."""

from __future__ import annotations

import subprocess
import sys

from backend.tools.sandbox.cgroups import SandboxCgroup, cgroup_name, remove_stale


def _dead_pid() -> int:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
    return int(finished.stdout)


def test_a_starting_server_sweeps_only_the_cgroups_of_servers_that_are_gone() -> None:
    # Another running server's sandbox: its cgroup is made (empty) just before the
    # sandbox joins it. A killed server's sandbox: its cgroup was left behind, empty.
    other = subprocess.Popen(  # a server that runs until its stdin closes
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        running = SandboxCgroup(f"s{other.pid}-u1-s-starting", 64 * 1024 * 1024, 8)
        left = SandboxCgroup(f"s{_dead_pid()}-u1-s-left", 64 * 1024 * 1024, 8)
        ours = SandboxCgroup(cgroup_name("u2-s-starting"), 64 * 1024 * 1024, 8)
        assert running.create() and left.create() and ours.create(), (
            "make test runs as root, where sandbox cgroups can be made"
        )
        try:
            remove_stale()
            assert all(folder.is_dir() for folder in running.folders + ours.folders)
            assert not any(folder.exists() for folder in left.folders)
        finally:
            for cgroup in (running, left, ours):
                cgroup.remove()
    finally:
        other.communicate()  # closes its stdin: it ends
