"""Which isolation the server can offer, decided once at start-up from SANDBOX.

`auto` uses bubblewrap when it works here. `none` must be asked for explicitly,
and is reported as a warning. `bwrap` that does not work stops start-up.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from dataclasses import dataclass
from typing import Literal

from backend.config import ConfigError
from backend.config.settings import SandboxMode
from backend.tools.sandbox import cgroups

logger = logging.getLogger(__name__)

INSTALL_HINT = "install it with `apt-get install -y bubblewrap` (or `make run`, which does)"
# bwrap is there but the kernel or a container runtime refuses it a namespace or a /proc.
NAMESPACE_HINT = (
    "allow unprivileged user namespaces; in a container, run it with "
    "`--security-opt unmask=/proc/*` (docs/deployment.md#container-image)"
)


NO_CGROUP = (
    "no writable cgroup here: a run's memory is bounded by address space alone, which "
    "stops DuckDB and other engines that reserve memory before they use it; run the "
    "server as root or give it a delegated cgroup"
)


@dataclass(frozen=True)
class SandboxStatus:
    mode: Literal["bwrap", "none", "unavailable"]
    detail: str
    memory_cgroup: bool = False  # a cgroup bounds each sandbox's memory (else rlimits only)

    @property
    def isolated(self) -> bool:
        return self.mode == "bwrap"


def bwrap_problem() -> str | None:
    """Why bubblewrap cannot isolate a process here, or None if it can."""
    binary = shutil.which("bwrap")
    if binary is None:
        return "bubblewrap (bwrap) is not installed"
    probe = [
        binary, "--unshare-all", "--die-with-parent", "--new-session",
        "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true",
    ]  # fmt: skip
    try:
        result = subprocess.run(probe, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap failed to start: {exc}"
    if result.returncode != 0:
        return f"bwrap cannot create namespaces here: {result.stderr.strip()}"
    return None


def resolve_sandbox(setting: SandboxMode) -> SandboxStatus:
    if setting == "none":
        status = SandboxStatus(
            "none", "SANDBOX=none: LLM-written code runs WITHOUT OS isolation on this host"
        )
        logger.warning("%s", status.detail)
        return status
    problem = bwrap_problem()
    if problem is None:
        detail = "bubblewrap: new user, pid, ipc, uts and network namespaces"
        memory_cgroup = cgroups.writable()
        if not memory_cgroup:
            logger.warning("Sandbox memory: %s", NO_CGROUP)
        return SandboxStatus("bwrap", detail, memory_cgroup)
    hint = INSTALL_HINT if shutil.which("bwrap") is None else NAMESPACE_HINT
    if setting == "bwrap":
        raise ConfigError(f"SANDBOX: bwrap is required but {problem}; {hint}")
    status = SandboxStatus("unavailable", f"{problem}; code execution is off until you {hint}")
    logger.warning("%s", status.detail)
    return status
