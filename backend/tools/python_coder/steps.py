"""A session's steps: each successful run, kept so that the session exports as a notebook.

python_coder records one step per answered task (agents and `mode: generate`), the
tools API one per `mode: code` run and per TDD solution whose tests all pass. A
step holds what a notebook needs to replay it outside the sandbox: the question,
the files it loaded (as plain pandas or DuckDB calls), its own code without the
sandbox's loader, what it printed and the files it wrote.
"""

from __future__ import annotations

from typing import Literal, Protocol

from pydantic import BaseModel, Field, field_validator

from backend.storage.sessions import SessionKey

MAX_KEPT_OUTPUT = 100_000  # characters of a step's output kept for the export (a rerun prints all)


class FileLoad(BaseModel):
    path: str
    variable: str
    expression: str  # plain Python: `pd.read_csv(...)`, `duckdb.read_parquet(...)`, a path


class SessionStep(BaseModel):
    kind: Literal["generate", "code", "tdd"]
    run_id: str
    question: str = ""  # the user's message
    goal: str = ""  # the task an agent gave python_coder for this step, when it differs
    loads: list[FileLoad] = Field(default_factory=list)
    code: str
    output: str = ""
    files: list[str] = Field(default_factory=list)
    tests: str = ""  # TDD: the test cases as code that runs them
    display: str = ""  # the table its last expression showed, as its text (the end of `output`)

    @field_validator("output")
    @classmethod
    def _kept_short(cls, output: str) -> str:
        if len(output) <= MAX_KEPT_OUTPUT:
            return output
        return output[:MAX_KEPT_OUTPUT] + "\n[cut here in the export; a rerun prints it all]\n"


class StepLog(Protocol):
    async def record(self, session_id: SessionKey, step: SessionStep) -> None:
        """Keep `step`; never raises (a step that cannot be kept is logged)."""
        ...


def file_loads(loads: list[tuple[str, str, str]]) -> list[FileLoad]:
    return [FileLoad(path=p, variable=v, expression=e) for p, v, e in loads]
