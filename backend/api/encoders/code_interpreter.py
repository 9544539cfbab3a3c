"""OpenAI's `code_interpreter` tool on `/v1/responses`: a turn's runs as its call items.

Each `Execution` is one `code_interpreter_call` item, with the code of the `Code`
before it (a tool without attempts has no code: null). A `Code` that no run follows
(a second one came first, or the turn ended) is an `incomplete` call. An item's id
is derived from the response's id and its place among the calls, so the streamed
items and the finished response name the same calls.

The files the runs wrote are cited in the answer as `container_file_citation`s.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Literal

from backend.core.events import Code, Execution, StepEvent

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp", ".svg")


@dataclass(frozen=True)
class CodeInterpreterOutput:
    """How the calls of a request's code interpreter are sent."""

    container_id: str
    file_id: Callable[[str], str]  # workspace-relative path -> container file id ("cfile_...")
    file_url: Callable[[str], str]  # workspace-relative path -> absolute URL of its content
    include_outputs: bool  # include=["code_interpreter_call.outputs"]


@dataclass
class CodeCall:
    """One call: its code, then the run that ends it."""

    id: str
    code: str | None
    run: Execution | None = None
    abandoned: bool = False  # its code never ran

    @property
    def status(self) -> Literal["in_progress", "completed", "incomplete", "failed"]:
        if self.run is not None:
            return "completed" if self.run.ok else "failed"
        return "incomplete" if self.abandoned else "in_progress"

    def item(self, output: CodeInterpreterOutput) -> dict[str, Any]:
        """The call's item as it stands (`in_progress`: no code yet, as OpenAI announces it)."""
        done = self.status != "in_progress"
        outputs = _outputs(self.run, output) if self.run and output.include_outputs else None
        return {
            "type": "code_interpreter_call",
            "id": self.id,
            "status": self.status,
            "code": self.code if done else "",
            "container_id": output.container_id,
            "outputs": outputs,
        }


Change = tuple[Literal["added", "done"], CodeCall]


class CodeCalls:
    """The turn's calls, folded from its steps in order."""

    def __init__(self, response_id: str, output: CodeInterpreterOutput) -> None:
        self.response_id = response_id
        self.output = output
        self.calls: list[CodeCall] = []
        self._pending: CodeCall | None = None

    @classmethod
    def of(
        cls, steps: Iterable[StepEvent], response_id: str, output: CodeInterpreterOutput
    ) -> CodeCalls:
        """All the calls of a finished turn's steps."""
        calls = cls(response_id, output)
        for step in steps:
            for _ in calls.add(step):
                pass
        for _ in calls.end():
            pass
        return calls

    def add(self, step: StepEvent) -> Iterator[Change]:
        """What `step` does to the calls: one added, one done, or both."""
        if isinstance(step, Code):
            yield from self.end()
            self._pending = self._new(step.code)
            yield "added", self._pending
        elif isinstance(step, Execution):
            call = self._pending
            if call is None:
                call = self._new(None)
                yield "added", call
            call.run = step
            self._pending = None
            yield "done", call

    def end(self) -> Iterator[Change]:
        """The code still waiting for its run will not get it."""
        if self._pending is not None:
            self._pending.abandoned = True
            yield "done", self._pending
            self._pending = None

    def item(self, call: CodeCall) -> dict[str, Any]:
        return call.item(self.output)

    def citations(self, text: str) -> list[dict[str, Any]]:
        """A `container_file_citation` per file the runs wrote, spanning its name where
        `text` first mentions it (else the empty span at the end), in the text's order."""
        return sorted(
            (_citation(text, path, self.output) for path in self.files()),
            key=lambda citation: citation["start_index"],
        )

    def files(self) -> list[str]:
        """The files the runs wrote, each once, in order; hidden ones (a part starts
        with ".") are the sandbox's own."""
        written: dict[str, None] = {}
        for call in self.calls:
            for path in call.run.files if call.run else []:
                if _shown(path):
                    written.setdefault(path, None)
        return list(written)

    def _new(self, code: str | None) -> CodeCall:
        seed = f"{self.response_id}/{len(self.calls)}".encode()
        call = CodeCall(id=f"ci_{hashlib.sha256(seed).hexdigest()[:32]}", code=code)
        self.calls.append(call)
        return call


def _shown(path: str) -> bool:
    return not any(part.startswith(".") for part in PurePosixPath(path).parts)


def _outputs(run: Execution, output: CodeInterpreterOutput) -> list[dict[str, Any]]:
    logs = run.stdout
    if not run.ok and run.error:
        logs += run.error if not logs or logs.endswith("\n") else "\n" + run.error
    found: list[dict[str, Any]] = [{"type": "logs", "logs": logs}] if logs else []
    # A chart's PNG is among its run's files (the sandbox writes it beside the spec).
    images = [p for p in run.files if p.lower().endswith(IMAGE_SUFFIXES) and _shown(p)]
    return found + [{"type": "image", "url": output.file_url(path)} for path in images]


def _citation(text: str, path: str, output: CodeInterpreterOutput) -> dict[str, Any]:
    filename = PurePosixPath(path).name
    found = re.search(rf"(?<![\w.-]){re.escape(filename)}(?![\w-])", text)
    start, end = found.span() if found else (len(text), len(text))
    return {
        "type": "container_file_citation",
        "container_id": output.container_id,
        "file_id": output.file_id(path),
        "filename": filename,
        "start_index": start,
        "end_index": end,
    }
