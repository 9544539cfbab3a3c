"""Print podman's default seccomp profile, with what the sandbox needs besides: sethostname.

Each sandbox is bubblewrap with a UTS namespace of its own, named `sandbox`
(backend/tools/sandbox/command.py). The container engines' default profiles allow
`sethostname` and `setdomainname` only to a container given CAP_SYS_ADMIN, so inside a
container bubblewrap cannot name it, and no sandbox starts. This profile allows those two
calls to everyone and keeps every other rule of the default one; the calls still change
only a UTS namespace that the caller owns (a process without capabilities cannot rename
the container). docs/deployment.md ("The sandbox's privileges") uses it:

    python3 scripts/sandbox_seccomp.py > /etc/containers/python-data-agent-seccomp.json
    podman run --security-opt seccomp=/etc/containers/python-data-agent-seccomp.json ...

Usage: sandbox_seccomp.py [DEFAULT_PROFILE]  (default: containers-common's, as podman uses)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_PROFILE = Path("/usr/share/containers/seccomp.json")
ALLOWED = ("sethostname", "setdomainname")


def sandbox_profile(default: dict[str, Any]) -> dict[str, Any]:
    """`default` with ALLOWED taken out of its rules and allowed by a rule of their own."""
    rules = []
    for rule in default["syscalls"]:
        names = [name for name in rule["names"] if name not in ALLOWED]
        if names:
            rules.append({**rule, "names": names})
    rules.append(
        {
            "names": list(ALLOWED),
            "action": "SCMP_ACT_ALLOW",
            "comment": "bubblewrap names each sandbox's own UTS namespace",
        }
    )
    return {**default, "syscalls": rules}


def main(argv: list[str]) -> int:
    source = Path(argv[1]) if len(argv) > 1 else DEFAULT_PROFILE
    try:
        default = json.loads(source.read_text())
    except (OSError, ValueError) as exc:
        print(f"error: cannot read the default seccomp profile {source}: {exc}", file=sys.stderr)
        return 1
    json.dump(sandbox_profile(default), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
