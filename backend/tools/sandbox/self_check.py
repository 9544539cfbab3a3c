"""The start-up self-check: one real sandbox runs one line before the sandbox is called healthy.

`resolve_sandbox` only proves that bubblewrap can make namespaces. A bind of a missing
path, a runtime it cannot see or a worker that cannot import its modules shows only when
a real sandbox starts, which would otherwise be a user's first run. So at start-up the
server starts one, in a scratch workspace of its own under DATA_DIR (no user's, counted
in no user's caps or usage, removed after), and runs `print(6 * 7)` in it. Until that
ends `/api/status` says `checking`; then `ok`, or `broken` with the reason, which the
log also gets whole. With SANDBOX_REQUIRED the check runs before the server listens, and
a broken sandbox stops start-up (`require`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import uuid
from pathlib import Path
from typing import Literal

from backend.storage.processes import running
from backend.tools.sandbox.availability import SandboxStatus
from backend.tools.sandbox.executor import ExecutorLimits, SandboxedExecutor
from backend.tools.sandbox.start_failure import SandboxStartError, short_reason

logger = logging.getLogger(__name__)

CHECK_CODE = "print(6 * 7)"
CHECK_TIMEOUT = 60.0  # seconds: a cold first start imports pandas and matplotlib
# Under DATA_DIR, made at start-up and kept (so DATA_DIR's listing does not change while the
# server runs); each check's own folder inside it is removed after.
CHECK_FOLDER = "sandbox-check"

CheckState = Literal["checking", "ok", "broken", "skipped"]


class SandboxUnavailable(Exception):
    """SANDBOX_REQUIRED is set and no sandbox ran the check's line: the server must not serve."""


class SandboxSelfCheck:
    """Whether a real sandbox started and ran one line here: `state` and `reason`."""

    def __init__(
        self,
        data_dir: Path,
        sandbox: SandboxStatus,
        limits: ExecutorLimits,
        timeout: float = CHECK_TIMEOUT,
    ) -> None:
        self.data_dir = data_dir
        self.sandbox = sandbox
        self.limits = limits
        self.timeout = timeout
        self.state: CheckState = "checking"
        self.reason = ""
        self.folder = data_dir / CHECK_FOLDER
        self.folder.mkdir(mode=0o700, exist_ok=True)
        _remove_stale(self.folder)
        if sandbox.mode == "unavailable":  # nothing to start: code execution is off
            self.state, self.reason = "broken", sandbox.detail

    def skip(self, reason: str) -> None:
        """No check here (sandboxes run elsewhere): `reason` says why."""
        self.state, self.reason = "skipped", reason

    async def require(self) -> None:
        """Run the check now, and raise SandboxUnavailable unless a sandbox ran the line
        (SANDBOX_REQUIRED: the server serves nothing before it)."""
        await self.run()
        if self.state != "ok":
            raise SandboxUnavailable(
                "SANDBOX_REQUIRED=true, but no sandbox can run code here, so the server "
                f"does not start: {self.reason} (in a container: docs/deployment.md, "
                '"The sandbox\'s privileges")'
            )

    async def run(self) -> None:
        """Start a sandbox, run the line, and record the outcome (never raises)."""
        if self.state != "checking":
            return
        folder = self.folder / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            ok, reason, said = await self._check(folder)
        except Exception as exc:  # whatever it was, the sandbox is not known to work
            logger.exception("Sandbox self-check: the check itself failed")
            ok, reason, said = False, f"the check failed: {short_reason(str(exc))}", ""
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if ok:
            self.state, self.reason = "ok", ""
            logger.info("Sandbox self-check: a sandbox started and ran %s", CHECK_CODE)
            return
        self.state, self.reason = "broken", reason
        logger.error(
            "Sandbox self-check FAILED, so code cannot run: %s; its error output: %s",
            reason,
            said or "(nothing)",
        )

    async def _check(self, folder: Path) -> tuple[bool, str, str]:
        """(ran, the reason if not, what the sandbox wrote to stderr)."""
        workspace = folder / "scratch" / "check"  # its staging folder lands beside, in `folder`
        workspace.mkdir(mode=0o700, parents=True)
        # The server's own run: in no user's usage, and not in the sandbox-run metrics.
        executor = SandboxedExecutor(workspace, self.limits, self.sandbox, measured=False)
        try:
            async with asyncio.timeout(self.timeout):
                await executor.start()
                result = await executor.run(CHECK_CODE)
        except SandboxStartError as exc:  # its reason is short and names no host path
            return False, exc.reason, exc.stderr
        except TimeoutError:
            return False, f"no sandbox ran one line within {self.timeout:.0f} s", ""
        finally:
            await executor.close()
        if result.success and result.stdout.strip() == "42":
            return True, "", ""
        printed = short_reason(result.stdout) or "nothing"
        problem = short_reason(result.error or "") or f"it printed {printed}, not 42"
        return False, f"a sandbox started, but {CHECK_CODE} failed: {problem}", result.stderr


def _remove_stale(folder: Path) -> None:
    """Remove the checks' folders of servers that are no longer running (killed mid-check)."""
    for entry in folder.iterdir():
        pid, _, _ = entry.name.partition("-")
        if pid.isdigit() and not running(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)
