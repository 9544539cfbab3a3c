"""PYTHON_EXECUTOR_MODE=openinterpreter: the real worker, a scripted model, our sandbox.

`make test` installs .venv-openinterpreter first, so these tests run for real.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Any

import pytest

from backend.config import load_settings
from backend.llm import LLMError
from backend.llm.in_process import ScriptedBackend
from backend.llm.turn import TurnLLM
from backend.storage.audit import AuditLog
from backend.storage.workspaces import Workspaces
from backend.tools.python_coder.openinterpreter.bridge import run_openinterpreter
from backend.tools.sandbox import openinterpreter_venv as install
from backend.tools.sandbox.availability import SandboxStatus
from backend.tools.sandbox.executor import (
    BasePythonExecutor,
    ExecutionResult,
    ExecutorLimits,
    SandboxedExecutor,
)
from backend.tools.sandbox.pool import ExecutorPool
from tests.conftest import StartServer, write_replies

LIMITS = ExecutorLimits(timeout=20, max_memory_mb=1024, max_file_mb=20)
BWRAP = SandboxStatus("bwrap", "test")

FAILING = """Let me look at the totals.
```python
totals = {"north": 3}
print(totals["south"])
```
"""
# Backticks and the word python inside the code: open-interpreter's parser must leave them be.
WORKING = """The key is missing, so I will use the one that exists and keep a marker.
```python
import os
totals = {"north": 3}
with open("outputs/marker.txt", "w") as handle:
    handle.write(f"python saw `{totals['north']}`")
print("in sandbox:", os.getcwd(), os.path.exists("/workspace"), totals["north"] * 14)
```
"""


def _installed() -> None:
    try:
        install.worker_python()
    except ImportError:
        if os.environ.get("CI"):
            raise  # `make test` installs it: CI must never skip these
        pytest.skip("the open-interpreter venv is missing: run `make openinterpreter`")


def _coder_llm(tmp_path: Path, replies: list[str]) -> TurnLLM:
    script = tmp_path / "replies.json"
    script.write_text(json.dumps(replies))
    settings = load_settings(DATA_DIR=tmp_path, SCRIPTED_REPLIES=str(script))
    backend = ScriptedBackend(settings, "test")
    return TurnLLM.for_backend(backend, "scripted", AuditLog(tmp_path), session_id="s")


def _prompts(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "logs" / "prompts.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def _children() -> dict[int, str]:
    """This test process's children (pid → state; Z is a zombie), servers of other tests too."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if int(ppid) == os.getpid():
            found[int(name)] = state
    return found


def _exists(path: str) -> bool:
    return Path(path).exists()  # /proc/<pid> stays while a process exists, zombies too


class _StuckExecutor(BasePythonExecutor):
    """Never finishes a run; notes which of our children were alive meanwhile."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.before = _children()
        self.children: dict[int, str] = {}

    async def run(self, code: str, timeout: float | None = None) -> ExecutionResult:  # noqa: ASYNC109
        self.children = {pid: s for pid, s in _children().items() if pid not in self.before}
        self.started.set()
        await asyncio.sleep(3600)
        return ExecutionResult(success=True)

    async def close(self) -> None:
        pass


async def test_a_failed_attempt_is_retried_with_its_error_and_runs_in_the_sandbox(
    tmp_path: Path,
) -> None:
    _installed()
    llm = _coder_llm(tmp_path, [FAILING, WORKING])
    workspace = Workspaces(tmp_path / "data").ensure("u1-s")
    async with SandboxedExecutor(workspace, LIMITS, BWRAP) as executor:
        result = await run_openinterpreter(
            "What is the south total?", "totals by region", llm, executor, timeout=120
        )

    assert result.success, result.error
    assert [a.error is None for a in result.attempts] == [False, True]
    assert "KeyError: 'south'" in (result.attempts[0].error or "")
    assert result.output == "in sandbox: /workspace True 42\n"
    assert "handle.write(f\"python saw `{totals['north']}`\")" in result.code
    assert (workspace / "outputs" / "marker.txt").read_text() == "python saw `3`"
    assert result.files == ["outputs/marker.txt"]
    assert result.llm_calls == llm.usage.calls == 2

    first, second = _prompts(tmp_path)
    assert {first["stage"], second["stage"]} == {"openinterpreter"}
    assert [m["role"] for m in second["prompt"]] == ["system", "human"]
    retry = second["prompt"][-1]["content"]
    assert retry.startswith("What is the south total?\n\nContext:\ntotals by region")
    assert "Attempt 1 failed with:\nTraceback" in retry and "KeyError: 'south'" in retry
    assert "KeyError" not in first["prompt"][-1]["content"]


async def test_a_reply_in_another_language_is_refused_not_run(tmp_path: Path) -> None:
    _installed()
    shell = "```bash\ntouch /tmp/pwned-by-openinterpreter\n```"
    llm = _coder_llm(tmp_path, [shell] * 9)
    workspace = Workspaces(tmp_path / "data").ensure("u1-s")
    async with SandboxedExecutor(workspace, LIMITS, BWRAP) as executor:
        result = await run_openinterpreter("Make a file", "", llm, executor, timeout=120)
    assert not result.success
    assert len(result.attempts) == 3
    assert "`bash` disabled or not supported" in (result.error or "")
    assert not _exists("/tmp/pwned-by-openinterpreter")


async def test_an_llm_failure_stops_the_worker_and_is_raised(tmp_path: Path) -> None:
    _installed()
    llm = _coder_llm(tmp_path, [FAILING])  # nothing left for the retry
    workspace = Workspaces(tmp_path / "data").ensure("u1-s")
    before = _children()
    async with SandboxedExecutor(workspace, LIMITS, BWRAP) as executor:
        with pytest.raises(LLMError, match="no reply left"):
            await run_openinterpreter("Totals?", "", llm, executor, timeout=120)
    assert _children().keys() <= before.keys()


async def test_a_timeout_kills_the_worker_and_leaves_no_process(tmp_path: Path) -> None:
    _installed()
    executor = _StuckExecutor()
    result = await run_openinterpreter(
        "Totals?", "", _coder_llm(tmp_path, [WORKING]), executor, timeout=10
    )
    assert not result.success
    assert "did not finish within 10 s" in (result.error or "")
    assert executor.children, "the worker was running when the run got stuck"
    assert not any(_exists(f"/proc/{pid}") for pid in executor.children)


async def test_cancelling_the_caller_kills_the_worker(tmp_path: Path) -> None:
    _installed()
    executor = _StuckExecutor()
    run = asyncio.create_task(
        run_openinterpreter("Totals?", "", _coder_llm(tmp_path, [WORKING]), executor, timeout=120)
    )
    await asyncio.wait_for(executor.started.wait(), 60)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert executor.children
    assert not any(_exists(f"/proc/{pid}") for pid in executor.children)


async def test_a_crashing_worker_is_a_clean_failure(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\necho 'Fatal Python error: no interpreter here' >&2\nexit 7\n")
    python.chmod(0o755)
    (venv / ".installed").touch()
    executor = _StuckExecutor()
    result = await run_openinterpreter(
        "Totals?", "", _coder_llm(tmp_path, []), executor, timeout=30, venv=venv
    )
    assert not result.success
    assert "exited with code 7" in (result.error or "")
    assert "Fatal Python error: no interpreter here" in (result.error or "")
    assert _children().keys() <= executor.before.keys()


async def test_without_the_venv_the_mode_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install, "DEFAULT_VENV", tmp_path / "missing")
    with pytest.raises(ImportError, match="make openinterpreter"):
        await run_openinterpreter(
            "Totals?", "", _coder_llm(tmp_path, []), _StuckExecutor(), timeout=5
        )
    settings = load_settings(DATA_DIR=tmp_path, PYTHON_EXECUTOR_MODE="openinterpreter")
    pool = ExecutorPool(settings, BWRAP, Workspaces(tmp_path))
    with pytest.raises(ImportError, match="make openinterpreter"):
        pool.get_python_executor("u1-s")


async def test_with_the_venv_the_mode_runs_in_the_normal_sandbox(tmp_path: Path) -> None:
    """Its code runs in bubblewrap like native mode's: in /workspace, seeing no host path."""
    _installed()
    settings = load_settings(DATA_DIR=tmp_path, PYTHON_EXECUTOR_MODE="openinterpreter")
    pool = ExecutorPool(settings, BWRAP, Workspaces(tmp_path))
    executor = pool.get_python_executor("u1-s")
    try:
        result = await executor.run(
            f"import os\nprint(os.getcwd(), os.path.exists({str(tmp_path)!r}))"
        )
    finally:
        await pool.close_all()
    assert isinstance(executor, SandboxedExecutor)
    assert result.stdout.split() == ["/workspace", "False"], result


def test_generate_mode_over_http_uses_open_interpreter_and_our_sandbox(
    start_server: StartServer, tmp_path: Path
) -> None:
    _installed()
    replies = [
        {"when": "Q-OI", "content": "```python\nprint('mean price:', df1['price'].mean())\n```"},
        {"when": "[stage: answer]", "content": "The mean price is 20.0."},
    ]
    server = start_server(
        SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", replies),
        PYTHON_EXECUTOR_MODE="openinterpreter",
    )
    with server.client(timeout=120) as http:
        http.post(
            "/api/upload",
            data={"session_id": "oi"},
            files={"file": ("sales.csv", b"price\n10\n30\n")},
        )
        result = http.post(
            "/api/tools/python_coder", json={"session_id": "oi", "query": "Q-OI mean price?"}
        ).json()
    assert result["success"], result
    assert result["output"] == "mean price: 20.0\n"
    assert result["answer"] == "The mean price is 20.0."
    assert [a["success"] for a in result["execution_history"]] == [True]
    assert "open-interpreter" in result["review_skipped"]
    stages = [r["stage"] for r in _prompts(server.data_dir)]
    assert stages == ["openinterpreter", "answer"]
