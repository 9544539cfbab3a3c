"""Run the code in the session sandbox; on failure, have the model fix it and retry.

Each attempt is kept: the code, what it printed, the error. A run that succeeds
but prints nothing and makes no file counts as a failure too, because there is
nothing to answer from. Static problems in a fix are caught before they reach
the sandbox and go back to the model like any other error. A fix that hands back code which already
failed is not run again; two in a row end the loop early.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial

from backend.tools.python_coder import prompts
from backend.tools.python_coder.conversation import Conversation
from backend.tools.python_coder.extraction import extract_code
from backend.tools.python_coder.prompts import CodingContext
from backend.tools.python_coder.result import ExecutionAttempt, Modification
from backend.tools.python_coder.verification import static_problems
from backend.tools.sandbox.executor import BasePythonExecutor, ExecutionResult

NO_OUTPUT = "The code ran but printed nothing. print() the answer."
REPEATED = "The fix repeated code that had already failed, so it was not run again."
_TRUNCATION_NOTICE = "\n[output truncated at 1 MB]"

OnAttempt = Callable[[ExecutionAttempt], Awaitable[None]]
OnRun = Callable[[int, str], Awaitable[None]]  # the attempt's number and code, before it runs


@dataclass
class Executed:
    code: str
    attempts: list[ExecutionAttempt] = field(default_factory=list)
    modifications: list[Modification] = field(default_factory=list)
    result: ExecutionResult | None = None

    @property
    def success(self) -> bool:
        return bool(self.attempts) and self.attempts[-1].success


async def execute_with_fixes(
    code: str,
    context: CodingContext,
    conversation: Conversation,
    executor: BasePythonExecutor,
    *,
    max_attempts: int,
    prefilter: bool = True,
    on_attempt: OnAttempt | None = None,
    on_run: OnRun | None = None,
) -> Executed:
    """Run `code`, fixing it from each error, at most `max_attempts` times."""
    executed = Executed(code)
    failed: dict[str, str] = {}  # code that already failed -> its error
    for attempt in range(1, max_attempts + 1):
        if executed.code in failed:
            # The model handed back code that already failed: running it again teaches nothing.
            record = ExecutionAttempt(
                attempt=attempt, code=executed.code, success=False, error=REPEATED
            )
        else:
            if on_run is not None:
                await on_run(attempt, executed.code)
            with conversation.llm.sandbox_span() as span:
                record = await _attempt(attempt, executed, executor, prefilter)
                if span is not None and span.is_recording():
                    span.set_attribute("pda.sandbox.success", record.success)
                    span.set_attribute("pda.run.attempt", attempt)
        executed.attempts.append(record)
        if on_attempt is not None:
            await on_attempt(record)
        if record.success or attempt == max_attempts or _repeated_twice(executed.attempts):
            break
        error = failed.setdefault(executed.code, record.error or NO_OUTPUT)
        if record.error == REPEATED:
            error = f"{REPEATED}\nIt failed with:\n{error}"
        earlier = [_summary_line(a) for a in executed.attempts[:-1]]
        reply = await conversation.text(
            "fix",
            prompts.fix_followup(context.query, error, attempt, earlier),
            partial(prompts.fix, context, executed.code, error, attempt, earlier),
        )
        executed.code = extract_code(reply) or executed.code
        executed.modifications.append(
            Modification(stage="fix", iteration=attempt, reason=error[-500:], code=executed.code)
        )
    return executed


def _summary_line(attempt: ExecutionAttempt) -> str:
    lines = (attempt.error or NO_OUTPUT).strip().splitlines()
    return f"Attempt {attempt.attempt} failed: {lines[-1][:200] if lines else 'no output'}"


def _repeated_twice(attempts: list[ExecutionAttempt]) -> bool:
    """Two repeats in a row: the model is stuck, and more attempts only cost time."""
    return len(attempts) >= 2 and all(a.error == REPEATED for a in attempts[-2:])


async def _attempt(
    attempt: int,
    executed: Executed,
    executor: BasePythonExecutor,
    prefilter: bool,
) -> ExecutionAttempt:
    problems = static_problems(executed.code, prefilter)
    if problems:
        return ExecutionAttempt(
            attempt=attempt,
            code=executed.code,
            success=False,
            error="The code was not run:\n" + "\n".join(problems),
        )
    result = await executor.run(executed.code)
    executed.result = result
    stdout = result.stdout + (_TRUNCATION_NOTICE if result.truncated else "")
    success = result.success and bool(stdout.strip() or result.files)
    error = result.error if not result.success else (None if success else NO_OUTPUT)
    return ExecutionAttempt(
        attempt=attempt,
        code=executed.code,
        success=success,
        stdout=stdout,
        error=error,
        files=result.files,
        tables=result.tables if success else [],
        execution_time=result.execution_time,
    )
