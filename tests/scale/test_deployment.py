"""docs/scale-out.md's "Running on several machines" commands, run exactly as written.

`deployment_run.py` does the work inside network and pid namespaces made for it
(`unshare --net --pid`, loopback only): PostgreSQL and SeaweedFS, then every command line
of the section (the migration, a Ray head, a sandbox node, two API servers, `ray stop`),
and a session that alternates between the servers. In its own pid namespace, `ray stop`
(which stops every Ray process it can see) sees only this deployment's, and whatever is
left ends with the namespace.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.scale.deployment_run import commands
from tests.support.live_server import ROOT
from tests.support.postgres import binaries
from tests.support.seaweedfs import weed_binary


def test_the_readme_commands_run_a_two_server_deployment() -> None:
    if os.getuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        pytest.skip(
            "DEPLOYMENT TEST NOT RUN: it needs root, unshare and ip (iproute2) "
            "to make its own network namespace"
        )
    if binaries() is None or weed_binary() is None:
        pytest.skip("DEPLOYMENT TEST NOT RUN: PostgreSQL or SeaweedFS binaries are missing")
    done = subprocess.run(
        [
            "unshare",
            "--net",
            "--pid",
            "--fork",
            "--mount-proc",
            "--",
            "bash",
            "-c",
            'ip link set lo up && exec "$0" -m tests.scale.deployment_run',
            sys.executable,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ran"] == commands()  # every line of the section, in order
    assert len(result["ran"]) == 5
    assert (result["first"], result["second"]) == ("set 42\n", "kept 42\n")
    assert result["me"] == "admin"
    assert "carol" in result["users"]  # copied from the old DATA_DIR by the migration
