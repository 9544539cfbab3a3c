"""scripts/sandbox_seccomp.py: the default profile, with sethostname allowed to everyone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from scripts.sandbox_seccomp import sandbox_profile
from tests.support.live_server import ROOT

# The shape of containers-common's profile: the calls gated on CAP_SYS_ADMIN twice over.
DEFAULT = {
    "defaultAction": "SCMP_ACT_ERRNO",
    "syscalls": [
        {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
        {
            "names": ["bpf", "sethostname", "setdomainname"],
            "action": "SCMP_ACT_ALLOW",
            "includes": {"caps": ["CAP_SYS_ADMIN"]},
        },
        {
            "names": ["sethostname", "setdomainname"],
            "action": "SCMP_ACT_ERRNO",
            "excludes": {"caps": ["CAP_SYS_ADMIN"]},
            "errnoRet": 1,
        },
    ],
}


def test_only_the_two_calls_move_to_a_rule_of_their_own() -> None:
    profile = sandbox_profile(DEFAULT)
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    rules = profile["syscalls"]
    assert rules[:2] == [
        {"names": ["read", "write"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["bpf"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
    ]  # the rule left empty is gone; the others keep their conditions
    assert len(rules) == 3
    assert rules[2]["names"] == ["sethostname", "setdomainname"]
    assert rules[2]["action"] == "SCMP_ACT_ALLOW" and "includes" not in rules[2]


def test_it_prints_the_profile_or_says_why_not(tmp_path: Path) -> None:
    source = tmp_path / "seccomp.json"
    source.write_text(json.dumps(DEFAULT))
    script = [sys.executable, str(ROOT / "scripts" / "sandbox_seccomp.py")]
    printed = subprocess.run([*script, str(source)], capture_output=True, text=True, check=True)
    assert json.loads(printed.stdout) == sandbox_profile(DEFAULT)
    missing = subprocess.run([*script, str(tmp_path / "none.json")], capture_output=True, text=True)
    assert missing.returncode == 1
    assert missing.stderr.startswith("error: cannot read the default seccomp profile")
