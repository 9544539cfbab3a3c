"""The open-interpreter worker: runs inside .venv-openinterpreter, never in the server.

It imports only the standard library and `interpreter`, and speaks JSON lines
with the server (`bridge.py`) on stdin/stdout:

    server → worker  {"type": "task", "query", "context", "max_attempts"}
    worker → server  {"type": "llm", "messages"}
    server → worker  {"type": "llm_result", "content"} or {"type": "llm_error", "error"}
    worker → server  {"type": "execute", "language", "code"}
    server → worker  {"type": "execute_result", "output", "error"}
    worker → server  {"type": "done", "success", "code", "output", "error", "attempts",
                      "messages"}

open-interpreter keeps its prompt, its markdown code-block parsing and its
conversation; its LLM and its one language (Python) are relays to the server,
so the model is ours and the code runs in our sandbox. Every other language and
the `computer` API are off. An attempt ends once its code has run; the next one
starts a fresh conversation whose task carries the errors of the earlier ones.
"""

from __future__ import annotations

import json
import os
import re
import sys
import types
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, TextIO

# A refused language makes open-interpreter ask the model again; this bounds it.
LLM_CALLS_PER_ATTEMPT = 3

# open-interpreter's text parser expects token-sized chunks: it drops a chunk that
# ends in a backtick (a fence may be arriving) and deletes the language name from
# every chunk of code. Single characters, with short backtick runs glued to the
# next one, keep both from touching the code.
_CHUNK = re.compile(r"`{3,}|`{1,2}[^`]?|[^`]", re.DOTALL)

SYSTEM_MESSAGE = """You are a data analyst who answers by writing and running Python.
Write one ```python code block per reply. It runs in a sandbox whose working directory is
the session's workspace (uploaded files are in uploads/, write new files to outputs/). The
sandbox has no network and cannot install packages; pandas, numpy, scipy, scikit-learn,
statsmodels and matplotlib are available, and duckdb for files larger than memory.
Variables persist between runs.
Print the results the user asked for."""

EXECUTION_INSTRUCTIONS = (
    "To run code, write a markdown code block that starts with ```python. "
    "Python is the only language available."
)


@dataclass
class Run:
    code: str
    output: str
    error: str | None


@dataclass
class Attempt:
    code: str
    output: str
    error: str | None


class Channel:
    """JSON lines to and from the server; a closed pipe ends the worker at once."""

    def __init__(self, reader: TextIO, writer: TextIO) -> None:
        self.reader = reader
        self.writer = writer

    def send(self, message: dict[str, Any]) -> None:
        self.writer.write(json.dumps(message) + "\n")
        self.writer.flush()

    def receive(self) -> dict[str, Any]:
        line = self.reader.readline()
        if not line:  # the server is gone: nobody is left to report to
            sys.stderr.flush()
            os._exit(3)
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ValueError(f"expected a JSON object, got {line[:80]!r}")
        return message

    def request(self, message: dict[str, Any]) -> dict[str, Any]:
        self.send(message)
        return self.receive()


@dataclass
class Relay:
    """open-interpreter's LLM and its Python, both answered by the server."""

    channel: Channel
    runs: list[Run] = field(default_factory=list)
    llm_calls: int = 0
    llm_error: str | None = None

    def new_attempt(self) -> None:
        self.runs = []
        self.llm_calls = 0

    def completions(self, **params: Any) -> Iterator[dict[str, Any]]:
        """Stands in for `interpreter.llm.completions`: OpenAI-style streamed deltas."""
        if self.runs or self.llm_error or self.llm_calls >= LLM_CALLS_PER_ATTEMPT:
            return  # an empty reply: open-interpreter ends the attempt without a model call
        self.llm_calls += 1
        messages = [_plain(message) for message in params["messages"]]
        reply = self.channel.request({"type": "llm", "messages": messages})
        if reply.get("type") != "llm_result":
            self.llm_error = str(reply.get("error", f"unexpected reply {reply.get('type')!r}"))
            return
        for piece in _CHUNK.findall(str(reply.get("content", ""))):
            yield {"choices": [{"delta": {"role": "assistant", "content": piece}}]}

    def execute(self, code: str) -> str:
        reply = self.channel.request({"type": "execute", "language": "python", "code": code})
        error = reply.get("error")
        run = Run(code, str(reply.get("output", "")), None if error is None else str(error))
        self.runs.append(run)
        return run.output + (run.error or "")


def _plain(message: dict[str, Any]) -> dict[str, str]:
    content = message.get("content", "")
    if isinstance(content, list):  # OpenAI content parts; only text is ever produced here
        content = "\n".join(str(part.get("text", "")) for part in content)
    return {"role": str(message.get("role", "user")), "content": str(content or "")}


def _lmc(message: dict[str, Any]) -> dict[str, str]:
    """An open-interpreter message for the transcript: role, type, format and text."""
    keys = ("role", "type", "format", "content")
    return {key: str(message[key]) for key in keys if message.get(key) is not None}


def relayed_python(relay: Relay) -> type:
    """open-interpreter's Python language, replaced by a relay to the server's sandbox."""

    class SandboxPython:
        name = "python"
        aliases = ("py", "python3")

        def __init__(self, computer: object) -> None:  # open-interpreter passes its computer
            self.computer = computer

        def run(self, code: str) -> Iterator[dict[str, Any]]:
            yield {"type": "console", "format": "output", "content": relay.execute(code)}

        def stop(self) -> None:
            pass

        def terminate(self) -> None:
            pass

    return SandboxPython


def _keep_all(
    messages: list[dict[str, Any]], system_message: str | None = None, **_: Any
) -> list[dict[str, Any]]:
    # tokentrim would fetch tiktoken's encoding files at run time; the server bounds prompts.
    head = [{"role": "system", "content": system_message}] if system_message is not None else []
    return head + messages


def build_interpreter(relay: Relay) -> Any:
    """An OpenInterpreter that can reach nothing but the relay."""
    import interpreter.core.llm.llm as oi_llm
    from interpreter import OpenInterpreter

    oi_llm.tt = types.SimpleNamespace(trim=_keep_all)
    oi = OpenInterpreter(
        offline=True,
        auto_run=True,
        disable_telemetry=True,
        conversation_history=False,
        loop=False,
        safe_mode="off",
        import_computer_api=False,
        import_skills=False,
        sync_computer=False,
        system_message=SYSTEM_MESSAGE,
    )
    oi.llm.completions = relay.completions
    oi.llm.model = "server"
    oi.llm.context_window = 1_000_000  # known, so litellm's model table is not consulted
    oi.llm.supports_functions = False  # code arrives as markdown blocks
    oi.llm.supports_vision = False
    oi.llm.vision_renderer = None
    oi.llm.execution_instructions = EXECUTION_INSTRUCTIONS
    oi.computer.offline = True
    oi.computer.terminal.languages = [relayed_python(relay)]
    return oi


def task_message(query: str, context: str, errors: list[str]) -> str:
    parts = [query.strip()]
    if context.strip():
        parts.append(f"Context:\n{context.strip()}")
    parts += [f"Attempt {n} failed with:\n{error}" for n, error in enumerate(errors, 1)]
    if errors:
        parts.append("Write new code that avoids these errors.")
    return "\n\n".join(parts)


def run_attempt(oi: Any, relay: Relay, message: str) -> Attempt:
    relay.new_attempt()
    oi.messages = []
    try:
        oi.chat(message, display=False, stream=False)
    except Exception as exc:  # open-interpreter's own failure ends this attempt only
        return Attempt("", "", f"open-interpreter failed: {type(exc).__name__}: {exc}")
    if relay.runs:
        last = relay.runs[-1]
        return Attempt(last.code, last.output, last.error)
    said = [m.get("content", "") for m in oi.messages if m.get("role") == "computer"]
    reason = f" ({said[-1]})" if said and isinstance(said[-1], str) else ""
    return Attempt("", "", f"No Python code block was run{reason}.")


def run_task(oi: Any, relay: Relay, task: dict[str, Any]) -> dict[str, Any]:
    attempts: list[Attempt] = []
    transcript: list[dict[str, Any]] = []
    for _ in range(max(1, int(task.get("max_attempts", 3)))):
        errors = [attempt.error or "" for attempt in attempts]
        message = task_message(str(task["query"]), str(task.get("context", "")), errors)
        attempt = run_attempt(oi, relay, message)
        transcript += [_lmc(message) for message in oi.messages]
        if relay.llm_error is not None:
            attempt.error = f"The LLM failed: {relay.llm_error}"
        attempts.append(attempt)
        if relay.llm_error is not None or attempt.error is None:
            break
    last = attempts[-1]
    return {
        "type": "done",
        "success": last.error is None,
        "code": last.code,
        "output": last.output,
        "error": last.error,
        "attempts": [asdict(attempt) for attempt in attempts],
        "messages": transcript,
    }


def main() -> int:
    # Keep the protocol's stdout to ourselves: whatever open-interpreter or its
    # libraries print, from Python or C, goes to stderr; input() finds no terminal.
    protocol_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    protocol_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    sys.stdout = sys.stderr
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - for the process's lifetime
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # no fetch at import
    os.environ["DISABLE_TELEMETRY"] = "true"

    channel = Channel(protocol_in, protocol_out)
    task = channel.receive()
    if task.get("type") != "task":
        raise ValueError(f"expected a task, got {task.get('type')!r}")
    relay = Relay(channel)
    channel.send(run_task(build_interpreter(relay), relay, task))
    return 0


if __name__ == "__main__":
    sys.exit(main())
