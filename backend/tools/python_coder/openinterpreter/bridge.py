"""The server's side of the open-interpreter worker: it answers the LLM and code requests.

`run_openinterpreter` starts `worker.py` with the open-interpreter venv's Python,
relays the model's turns to `TurnLLM` and the code to the session's executor
(our sandbox), and returns what the worker reports. The worker runs in its own
process group with a scratch HOME and none of the server's environment. One that
crashes, outlives `timeout` or whose caller is cancelled is killed with its whole
group and reaped; a crash or a timeout becomes a failed result with its stderr tail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from backend.llm.turn import Stage, TurnLLM
from backend.tools.sandbox.executor import BasePythonExecutor
from backend.tools.sandbox.openinterpreter_venv import worker_python

STAGE: Stage = "openinterpreter"
_WORKER_SCRIPT = Path(__file__).resolve().with_name("worker.py")
_STDERR_TAIL = 4_000  # characters of the worker's stderr kept for a failure report
_LINE_LIMIT = 16 * 1024 * 1024  # one protocol line: a whole conversation fits
_ROLES: dict[str, type[BaseMessage]] = {"system": SystemMessage, "assistant": AIMessage}


@dataclass
class OpenInterpreterAttempt:
    code: str
    output: str
    error: str | None


@dataclass
class OpenInterpreterResult:
    success: bool
    code: str = ""
    output: str = ""
    error: str | None = None
    attempts: list[OpenInterpreterAttempt] = field(default_factory=list)
    llm_calls: int = 0
    files: list[str] = field(default_factory=list)  # written by the runs, workspace-relative
    figures: list[str] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)  # open-interpreter's own


class WorkerProtocolError(Exception):
    """The worker sent something that is not a protocol message."""


async def run_openinterpreter(
    query: str,
    context: str,
    llm: TurnLLM,
    executor: BasePythonExecutor,
    *,
    max_attempts: int = 3,
    timeout: float,  # noqa: ASYNC109 - the worker is killed, not just abandoned
    venv: Path | None = None,
) -> OpenInterpreterResult:
    """Let open-interpreter write the code for `query`, running it with `executor`.

    Raises `ImportError` if the optional venv is missing, and the LLM's own error
    if the model fails (after the worker has stopped).
    """
    python = worker_python(venv)
    task = {"type": "task", "query": query, "context": context, "max_attempts": max_attempts}
    with tempfile.TemporaryDirectory(prefix="openinterpreter-") as home:
        process = await asyncio.create_subprocess_exec(
            str(python),
            "-I",
            str(_WORKER_SCRIPT),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=home,
            env=_environment(home),
            start_new_session=True,
            limit=_LINE_LIMIT,
        )
        assert process.stderr is not None
        stderr = asyncio.create_task(_tail(process.stderr))
        conversation = _Conversation(process, llm, executor)
        try:
            done, reason = await _finish(conversation, task, timeout)
        except BaseException:  # cancelled: the worker goes down with us
            stderr.cancel()
            raise
        finally:
            await _stop(process)
        stderr_tail = await _collect(stderr)
    if done is None:
        reason = reason or f"The open-interpreter worker exited with code {process.returncode}"
        return conversation.failed(reason, stderr_tail)
    if conversation.llm_failure is not None:
        raise conversation.llm_failure
    return conversation.result(done)


async def _finish(
    conversation: _Conversation,
    task: dict[str, Any],
    timeout: float,  # noqa: ASYNC109
) -> tuple[dict[str, Any] | None, str | None]:
    """The worker's `done` message, or None and why it did not come (None: it exited)."""
    try:
        async with asyncio.timeout(timeout):
            return await conversation.run(task), None
    except TimeoutError:
        return None, f"open-interpreter did not finish within {timeout:g} s"
    except WorkerProtocolError as exc:
        return None, f"The open-interpreter worker broke the protocol: {exc}"
    except ConnectionError:  # it closed stdin: it is exiting
        return None, None


class _Conversation:
    """Answers one worker's requests until it reports `done`."""

    def __init__(
        self, process: asyncio.subprocess.Process, llm: TurnLLM, executor: BasePythonExecutor
    ) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.llm = llm
        self.executor = executor
        self.llm_calls = 0
        self.llm_failure: Exception | None = None
        self.files: list[str] = []
        self.figures: list[str] = []

    async def run(self, task: dict[str, Any]) -> dict[str, Any] | None:
        """The worker's `done` message, or None if it exited without one."""
        await self._send(task)
        while line := await self._receive():
            try:
                message = json.loads(line)
            except ValueError:
                raise WorkerProtocolError(f"not JSON: {line[:120]!r}") from None
            kind = message.get("type") if isinstance(message, dict) else None
            if kind == "done":
                return dict(message)
            if kind == "llm":
                await self._send(await self._llm(message))
            elif kind == "execute":
                await self._send(await self._execute(message))
            else:
                raise WorkerProtocolError(f"unknown message type {kind!r}")
        return None

    async def _receive(self) -> bytes:
        try:
            return await self.stdout.readline()
        except ValueError as exc:  # a line over _LINE_LIMIT
            raise WorkerProtocolError(str(exc)) from None

    async def _send(self, message: dict[str, Any]) -> None:
        self.stdin.write(json.dumps(message).encode() + b"\n")
        await self.stdin.drain()

    async def _llm(self, request: dict[str, Any]) -> dict[str, Any]:
        self.llm_calls += 1
        messages = [
            _ROLES.get(str(m.get("role")), HumanMessage)(content=str(m.get("content", "")))
            for m in request.get("messages", [])
        ]
        try:
            content = await self.llm.chat(STAGE, messages)
        except Exception as exc:  # raised again once the worker has finished
            self.llm_failure = exc
            return {"type": "llm_error", "error": str(exc)}
        return {"type": "llm_result", "content": content}

    async def _execute(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("language") != "python":
            error = f"Only Python runs here, not {request.get('language')!r}."
            return {"type": "execute_result", "output": "", "error": error}
        result = await self.executor.run(str(request.get("code", "")))
        self.files += [name for name in result.files if name not in self.files]
        self.figures += [name for name in result.figures if name not in self.figures]
        output = result.stdout + result.stderr
        if result.truncated:
            output += "\n[output truncated]"
        return {"type": "execute_result", "output": output, "error": result.error}

    def result(self, done: dict[str, Any]) -> OpenInterpreterResult:
        attempts = [
            OpenInterpreterAttempt(
                code=str(a.get("code", "")),
                output=str(a.get("output", "")),
                error=None if a.get("error") is None else str(a["error"]),
            )
            for a in done.get("attempts", [])
        ]
        return OpenInterpreterResult(
            success=bool(done.get("success")),
            code=str(done.get("code", "")),
            output=str(done.get("output", "")),
            error=None if done.get("error") is None else str(done["error"]),
            attempts=attempts,
            llm_calls=self.llm_calls,
            files=self.files,
            figures=self.figures,
            messages=list(done.get("messages", [])),
        )

    def failed(self, reason: str, stderr: str) -> OpenInterpreterResult:
        detail = f"{reason}; its stderr ends with:\n{stderr}" if stderr.strip() else reason
        return OpenInterpreterResult(
            success=False,
            error=detail,
            llm_calls=self.llm_calls,
            files=self.files,
            figures=self.figures,
        )


def _environment(home: str) -> dict[str, str]:
    """None of the server's variables (API keys, SECRET_KEY) reach open-interpreter."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "DISABLE_TELEMETRY": "true",
    }


async def _tail(stream: asyncio.StreamReader) -> str:
    kept = b""
    while chunk := await stream.read(65_536):
        kept = (kept + chunk)[-_STDERR_TAIL:]
    return kept.decode(errors="replace").strip()


async def _collect(stderr: asyncio.Task[str]) -> str:
    """The stderr tail, once the pipe has closed (the worker's group is dead by now)."""
    try:
        return await asyncio.wait_for(stderr, 5)
    except TimeoutError:  # something outside the group still holds the pipe
        return ""


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGKILL the worker's whole process group and reap it."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    await process.wait()
