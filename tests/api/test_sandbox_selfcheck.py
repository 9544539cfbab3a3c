"""The sandbox as users start the server: a relative DATA_DIR, and the start-up self-check.

`make run` leaves DATA_DIR at `./data`. Code must run then, `/api/status` must say whether
a real sandbox ran a line at start-up, and when bubblewrap cannot start a sandbox its own
words must reach the log (whole) and the status and the user's error (without host paths).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ADMIN_PASSWORD
from tests.support.broken_bwrap import MISSING, broken_bwrap_path
from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="needs bubblewrap (make test installs it)"
)


def settled_sandbox(server: LiveServer, timeout: float = 120) -> dict[str, Any]:
    """/api/status's sandbox once the start-up check has ended (it says "checking" till then)."""
    seen: dict[str, Any] = {}
    with server.client() as http:

        def settled() -> bool:
            seen.update(http.get("/api/status").json()["sandbox"])
            return seen["state"] != "checking"

        wait_for(settled, timeout=timeout)
    return seen


def run_code(server: LiveServer, code: str) -> dict[str, Any]:
    with server.client(timeout=120) as http:
        response = http.post("/api/tools/python_coder", json={"session_id": "s1", "code": code})
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def started(root: Path, **env: str) -> LiveServer:
    replies = root / "replies.json"
    replies.write_text(json.dumps([]))
    server = LiveServer(
        root / "data",
        DATA_DIR="data",  # relative, as `make run` leaves it
        LLM_BACKEND="scripted",
        SCRIPTED_REPLIES="replies.json",
        ADMIN_PASSWORD=ADMIN_PASSWORD,
        SANDBOX_SELF_CHECK="true",  # what these tests are about (off in other tests' servers)
        **env,
    )
    server.cwd = root  # the server starts there, as from a checkout
    return server.start()


@pytest.fixture(scope="module")
def relative(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server = started(tmp_path_factory.mktemp("relative"))
    try:
        yield server
    finally:
        server.stop()


def test_code_runs_with_a_relative_data_dir(relative: LiveServer) -> None:
    result = run_code(relative, "print(6*7)")
    assert result["success"], result
    assert result["data"]["stdout"] == "42\n"
    assert (relative.data_dir / "scratch").is_dir()  # under the directory it started in


def test_status_says_the_sandbox_is_ok_once_a_real_one_ran_a_line(relative: LiveServer) -> None:
    sandbox = settled_sandbox(relative)
    assert (sandbox["state"], sandbox["reason"]) == ("ok", "")
    assert sandbox["mode"] == "bwrap" and sandbox["isolated"] is True
    assert "Sandbox self-check: a sandbox started and ran" in relative.log()
    # The check used a folder of the server's own, emptied after: no user's workspace.
    assert list((relative.data_dir / "sandbox-check").iterdir()) == []
    assert all(p.name.startswith("u") for p in (relative.data_dir / "scratch").glob("*"))


@pytest.fixture(scope="module")
def broken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server on which bubblewrap starts no sandbox (tests/support/broken_bwrap.py)."""
    root = tmp_path_factory.mktemp("broken")
    server = started(root, PATH=broken_bwrap_path(root / "bin", os.environ["PATH"]))
    try:
        yield server
    finally:
        server.stop()


def test_a_sandbox_that_cannot_start_is_broken_in_the_status_with_bwraps_reason(
    broken: LiveServer,
) -> None:
    sandbox = settled_sandbox(broken)
    assert sandbox["state"] == "broken", sandbox
    assert "Can't find source path" in sandbox["reason"], sandbox
    assert "No such file or directory" in sandbox["reason"]
    assert MISSING not in sandbox["reason"]  # the host's paths are no user's business
    # The log has one clear line, with bubblewrap's own words in full.
    failed = [line for line in broken.log().splitlines() if "self-check FAILED" in line]
    assert len(failed) == 1, broken.log()
    assert f"bwrap: Can't find source path {MISSING}: No such file or directory" in failed[0]
    assert list((broken.data_dir / "sandbox-check").iterdir()) == []


def test_a_run_that_cannot_start_says_why_and_the_log_keeps_bwraps_words(
    broken: LiveServer,
) -> None:
    result = run_code(broken, "print(6*7)")
    assert not result["success"]
    assert "Can't find source path" in result["error"], result
    assert MISSING not in json.dumps(result) and "Traceback" not in result["error"]
    said = [
        line
        for line in broken.log().splitlines()
        if "The sandbox did not start" in line and "self-check" not in line
    ]
    assert said and f"bwrap: Can't find source path {MISSING}" in said[-1], broken.log()


def test_without_isolation_the_check_runs_and_says_not_isolated(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    server = started(tmp_path_factory.mktemp("none"), SANDBOX="none")
    try:
        sandbox = settled_sandbox(server)
        assert (sandbox["state"], sandbox["mode"], sandbox["isolated"]) == ("ok", "none", False)
        assert "WITHOUT OS isolation" in sandbox["warning"]
        assert run_code(server, "print(6*7)")["data"]["stdout"] == "42\n"
    finally:
        server.stop()


def test_backups_know_the_self_checks_folder() -> None:
    """A backup names why it leaves the check's scratch folder out (it is remade at start)."""
    from backend.admin.inventory import LEFT_OUT, SANDBOX_CHECK
    from backend.tools.sandbox.self_check import CHECK_FOLDER

    assert SANDBOX_CHECK == CHECK_FOLDER and SANDBOX_CHECK in LEFT_OUT
