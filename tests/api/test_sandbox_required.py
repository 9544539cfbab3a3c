"""SANDBOX_REQUIRED: the server runs its sandbox self-check before it listens, and a
sandbox that cannot run a line stops start-up with a non-zero status and the reason,
instead of a server that serves with code execution broken (the container image's case).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from uvicorn.config import STARTUP_FAILURE

from backend.config import ConfigError, load_settings
from tests.conftest import ADMIN_PASSWORD
from tests.support.broken_bwrap import MISSING, broken_bwrap_path
from tests.support.live_server import ROOT, LiveServer, free_port, server_env

needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="needs bubblewrap (make test installs it)"
)


def required(root: Path, **env: str) -> dict[str, str]:
    """A scripted server's settings with the sandbox required (and so checked)."""
    replies = root / "replies.json"
    replies.write_text(json.dumps([]))
    return {
        "LLM_BACKEND": "scripted",
        "SCRIPTED_REPLIES": str(replies),
        "ADMIN_PASSWORD": ADMIN_PASSWORD,
        "SANDBOX_SELF_CHECK": "true",
        "SANDBOX_REQUIRED": "true",
        **env,
    }


@needs_bwrap
def test_a_sandbox_that_cannot_start_stops_start_up_with_bwraps_reason(tmp_path: Path) -> None:
    path = broken_bwrap_path(tmp_path / "bin", os.environ["PATH"])
    settings = required(tmp_path, PATH=path)
    env = {**os.environ, **server_env(free_port(), tmp_path / "data", **settings)}
    result = subprocess.run(
        [sys.executable, str(ROOT / "run_backend.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = result.stdout + result.stderr
    assert result.returncode == STARTUP_FAILURE, said  # uvicorn's, for a failed lifespan
    assert "SANDBOX_REQUIRED=true, but no sandbox can run code here" in said
    assert "Can't find source path" in said  # bubblewrap's own words
    assert "Application startup complete" not in said and "Open http" not in said
    assert MISSING in said  # the log keeps them whole: it is the operator's, not a user's


@needs_bwrap
def test_a_working_sandbox_is_checked_before_the_first_request(tmp_path: Path) -> None:
    server = LiveServer(tmp_path / "data", **required(tmp_path)).start()
    try:
        with server.client() as http:
            sandbox = http.get("/api/status").json()["sandbox"]
        # Never "checking": the check ended before the server listened.
        assert (sandbox["state"], sandbox["mode"], sandbox["isolated"]) == ("ok", "bwrap", True)
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("variable", "value", "words"),
    [
        ("SANDBOX", "none", "SANDBOX=none runs code without a sandbox"),
        ("SANDBOX_SELF_CHECK", "false", "set SANDBOX_SELF_CHECK=true"),
    ],
)
def test_it_refuses_settings_that_would_skip_the_sandbox(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, words: str
) -> None:
    monkeypatch.setenv("SANDBOX_REQUIRED", "true")
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as error:
        load_settings()
    assert "SANDBOX_REQUIRED" in str(error.value) and words in str(error.value)
