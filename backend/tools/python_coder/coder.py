"""The python_coder pipeline: files → generate → verify → execute with fixes → answer.

`PythonCoder.run` is the one entry point, for the HTTP tool and for the agents.
Each stage lives in its own module; this one only wires them together and
assembles the audit trail.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.concurrency import run_in_threadpool

from backend.config import Settings
from backend.files import describe_for_prompt, loader_code, plain_loads
from backend.files.catalog import WorkspaceCatalog
from backend.llm import LLMError
from backend.llm.turn import TurnLLM
from backend.storage.sessions import SessionKey
from backend.storage.workspaces import NotARegularFile, UnsafePath, Workspaces
from backend.tools.data_sources.examples import SourcesPrompt, reuse_note, reused
from backend.tools.provenance import RunOutput, cite
from backend.tools.python_coder import notepad, prompts
from backend.tools.python_coder.analysis_spec import plan_analysis, render_code
from backend.tools.python_coder.answer import (
    OnAnswer,
    output_answer,
    printed_answer,
    stream_answer,
    write_answer,
)
from backend.tools.python_coder.conversation import Conversation, self_check
from backend.tools.python_coder.execution import OnAttempt, OnRun, execute_with_fixes
from backend.tools.python_coder.extraction import extract_code
from backend.tools.python_coder.openinterpreter.bridge import run_openinterpreter
from backend.tools.python_coder.prompts import CodingContext
from backend.tools.python_coder.request import CoderRequest
from backend.tools.python_coder.result import CoderResult, ExecutionAttempt
from backend.tools.python_coder.selection import ChosenFiles, choose_files
from backend.tools.python_coder.steps import FileLoad, SessionStep, StepLog, file_loads
from backend.tools.python_coder.verification import verify
from backend.tools.sandbox.executor import BasePythonExecutor

_OPENINTERPRETER_ATTEMPTS = 3  # the seed's retry count


@dataclass(frozen=True)
class CoderProgress:
    """Callbacks for a caller that shows a run as it goes (the agents' timeline)."""

    running: OnRun | None = None  # an attempt's code, before the sandbox runs it
    ran: OnAttempt | None = None  # the attempt's outcome
    answering: OnAnswer | None = None  # the turn's answer as it is written (answer="final")


class PythonCoder:
    def __init__(
        self,
        settings: Settings,
        workspaces: Workspaces,
        catalog: WorkspaceCatalog,
        steps: StepLog | None = None,
    ) -> None:
        self.settings = settings
        self.workspaces = workspaces
        self.catalog = catalog
        self.steps = steps  # where each answered task is kept for the session's export
        # The session's attached data sources for the prompt, picked for the question
        # (`DataSources.prompt_context`); None: no data sources on this server.
        self.sources_context: Callable[[SessionKey, str], SourcesPrompt] | None = None
        self._notepad_lock = threading.Lock()  # one read-modify-write of notepad.json at a time

    async def run(
        self,
        request: CoderRequest,
        llm: TurnLLM,
        executor: BasePythonExecutor,
        progress: CoderProgress | None = None,
    ) -> CoderResult:
        """Answer `request`; `progress` hears of each attempt as it starts and ends."""
        started = time.monotonic()
        result = CoderResult(success=False)
        try:
            await self._run(request, llm, executor, result, progress or CoderProgress())
        except LLMError as exc:
            if not result.execution_history:
                raise  # nothing ran yet: the caller reports the model's failure
            # Code already ran: keep what it did, and say why the loop stopped.
            result.success = False
            result.error = f"The LLM failed before the task was done: {exc.message}"
            result.answer = result.error
        finally:
            result.execution_time = time.monotonic() - started
            result.llm_calls = llm.usage.calls
            result.tokens = llm.usage.total_tokens
        return result

    async def _run(
        self,
        request: CoderRequest,
        llm: TurnLLM,
        executor: BasePythonExecutor,
        result: CoderResult,
        progress: CoderProgress,
    ) -> None:
        settings = self.settings
        chosen = await choose_files(
            request, self.catalog, llm, limit=settings.PYTHON_CODE_MAX_FILES_TO_SELECT
        )
        result.selected_files = chosen.selected
        before = await run_in_threadpool(
            notepad.read_variables, self.workspaces, request.session_id
        )
        sources = SourcesPrompt()
        if self.sources_context is not None:
            question = request.question or request.query
            sources = await run_in_threadpool(self.sources_context, request.session_id, question)
        context = CodingContext(
            query=request.query,
            history=[] if request.head is not None else request.history,  # the head has it
            plan=request.plan,
            react=request.react,
            metadata=describe_for_prompt(chosen.files, chosen.mapping),
            variables=notepad.describe_variables(before),
            notepad=notepad.describe_entries(
                await run_in_threadpool(notepad.read_entries, self.workspaces, request.session_id)
            ),
            head=request.head,
            charts=llm.profile.free_form_code,  # a small model keeps to Matplotlib
            sources=sources.text,
        )
        preamble = loader_code(chosen.mapping, chosen.files)
        loads = file_loads(plain_loads(chosen.mapping, chosen.files))
        if preamble:
            loaded = await executor.run(preamble)
            if not loaded.success:
                result.error = f"Loading the data files failed:\n{loaded.error}"
                result.answer = result.error
                return

        if settings.PYTHON_EXECUTOR_MODE == "openinterpreter":
            known = set(before) | set(chosen.mapping.values())
            await self._run_openinterpreter(
                request, context, llm, executor, preamble, known, loads, result, progress
            )
            return
        conversation = Conversation(llm)
        check: str | None = None
        code = await self._spec_first(request, chosen, llm, result)
        if code is None:
            prompt = prompts.generate(context)
            reply = await conversation.text("generate", prompt, lambda: prompt)
            code, check = extract_code(reply), self_check(reply)
        verified = await verify(
            code,
            context,
            conversation,
            max_iterations=settings.PYTHON_CODE_MAX_ITERATIONS,
            prefilter=settings.AST_PREFILTER,
            check=check,
        )
        result.verification_history = verified.rounds
        result.modifications = list(verified.modifications)
        result.review_skipped = verified.review_skipped
        result.iterations = len(verified.rounds)

        async def on_attempt(attempt: ExecutionAttempt) -> None:
            result.execution_history.append(attempt)  # kept even if a later LLM call fails
            if progress.ran is not None:
                await progress.ran(attempt)

        async def on_run(attempt: int, code: str) -> None:
            if progress.running is not None:  # the code as it runs, data loading included
                await progress.running(attempt, (preamble + "\n" if preamble else "") + code)

        executed = await execute_with_fixes(
            verified.code,
            context,
            conversation,
            executor,
            max_attempts=settings.PYTHON_CODE_MAX_RETRIES,
            prefilter=settings.AST_PREFILTER,
            on_attempt=on_attempt,
            on_run=on_run,
        )
        result.modifications.extend(executed.modifications)
        result.code = (preamble + "\n" if preamble else "") + executed.code
        last = executed.attempts[-1]
        result.output = last.stdout
        result.files = list(last.files)  # a failed attempt's plots are not the answer's
        if executed.result is not None:
            result.variables = executed.result.variables
        if not executed.success:
            result.error = (
                f"The code still failed after {len(executed.attempts)} attempts. "
                f"Last error:\n{last.error}"
            )
            result.answer = result.error
            return
        known = set(before) | set(chosen.mapping.values())
        await self._finish(request, conversation, known, result, executed.code, loads, progress)
        if request.answer != "none" and (used := reused(executed.code, sources.examples)):
            note = reuse_note(used)  # said whether or not the model said it
            result.answer += note
            if result.final and progress.answering is not None:
                await progress.answering(note)

    async def _spec_first(
        self, request: CoderRequest, chosen: ChosenFiles, llm: TurnLLM, result: CoderResult
    ) -> str | None:
        """A model short of free-form code fills a spec, rendered as code; None: write freely."""
        if llm.profile.free_form_code:
            return None
        spec = await plan_analysis(request.query, chosen.files, chosen.mapping, llm)
        if spec is None:
            return None
        result.analysis_spec = spec.to_dict()
        large = {chosen.mapping.get(f.name) for f in chosen.files if f.large}
        return render_code(spec, relation=spec.frame in large)

    async def _finish(
        self,
        request: CoderRequest,
        conversation: Conversation,
        known: set[str],
        result: CoderResult,
        code: str,
        loads: list[FileLoad],
        progress: CoderProgress,
    ) -> None:
        """A successful run of `code` (after the loader): write the answer, the notepad
        entry (`known`: variables it did not create) and the session's step."""
        result.success = True
        await self._answer(request, conversation, result, progress)
        if result.execution_history:
            result.run_id = result.execution_history[-1].run_id
            run = RunOutput(result.run_id, result.code, result.output)
            result.citations = await run_in_threadpool(
                cite, result.answer, [run], question=request.query, files=result.files
            )
            if self.steps is not None:
                await self.steps.record(request.session_id, _step(request, result, code, loads))
        try:
            result.notepad_entry = await run_in_threadpool(self._record, request, result, known)
        except (OSError, UnsafePath, NotARegularFile) as exc:  # the sandbox broke scripts/
            result.warnings.append(f"The notepad could not be updated: {exc}")

    async def _answer(
        self,
        request: CoderRequest,
        conversation: Conversation,
        result: CoderResult,
        progress: CoderProgress,
    ) -> None:
        """The answer `request.answer` asks for; the run's output where the model fails."""
        result.answer = output_answer(result.output, result.files)
        if request.answer == "none":
            return  # the agent answers from the output
        if conversation.llm.profile.templated_answer:  # its prose invents code and output
            final = request.answer == "final" and progress.answering is not None
            result.answer = printed_answer(result.output, result.files, link_plots=not final)
            if final and progress.answering is not None:
                result.final = True
                await progress.answering(result.answer)
            return
        try:
            if request.answer == "final" and progress.answering is not None:
                written = await stream_answer(
                    conversation,
                    request.question or request.query,
                    request.query,
                    result.output,
                    result.files,
                    progress.answering,
                    partial=request.partial,
                )
                if written is not None:
                    result.answer, result.final = written, True
                return
            result.answer = await write_answer(
                request.query, result.output, result.files, conversation.llm
            )
        except LLMError:  # the run succeeded; its output is the answer
            if request.answer == "final" and progress.answering is not None:
                result.final = True  # the output answer below ends the turn: show it
                await progress.answering(result.answer)

    def _record(
        self, request: CoderRequest, result: CoderResult, known: set[str]
    ) -> dict[str, Any]:
        after = notepad.read_variables(self.workspaces, request.session_id)
        with self._notepad_lock:
            return notepad.record_task(
                self.workspaces,
                request.session_id,
                task=request.query,
                summary=_summary(result.output),
                code=result.code,
                variables=[name for name in after if name not in known],
            )

    async def _run_openinterpreter(
        self,
        request: CoderRequest,
        context: CodingContext,
        llm: TurnLLM,
        executor: BasePythonExecutor,
        preamble: str,
        known: set[str],
        loads: list[FileLoad],
        result: CoderResult,
        progress: CoderProgress,
    ) -> None:
        """PYTHON_EXECUTOR_MODE=openinterpreter: its loop writes the code, our sandbox runs it."""
        ran = await run_openinterpreter(
            request.query,
            "\n\n".join(
                part
                for part in (
                    context.metadata,
                    context.variables and "Variables:\n" + context.variables,
                )
                if part
            ),
            llm,
            executor,
            max_attempts=_OPENINTERPRETER_ATTEMPTS,
            timeout=_OPENINTERPRETER_ATTEMPTS
            * (self.settings.PYTHON_CODE_TIMEOUT + self.settings.LLM_REQUEST_TIMEOUT),
        )
        result.execution_history = [
            ExecutionAttempt(
                attempt=number,
                code=attempt.code,
                success=attempt.error is None,
                stdout=attempt.output,
                error=attempt.error,
            )
            for number, attempt in enumerate(ran.attempts, start=1)
        ]
        result.code = (preamble + "\n" if preamble else "") + ran.code
        result.output = ran.output
        result.files = ran.files
        result.review_skipped = "open-interpreter runs its own loop without a review"
        if not ran.success:
            result.error = ran.error or "open-interpreter did not produce working code"
            result.answer = result.error
            return
        await self._finish(request, Conversation(llm), known, result, ran.code, loads, progress)


def _step(
    request: CoderRequest, result: CoderResult, code: str, loads: list[FileLoad]
) -> SessionStep:
    question = request.question or request.query
    return SessionStep(
        kind="generate",
        run_id=result.run_id or "",
        question=question,
        goal=request.query if request.query != question else "",
        loads=loads,
        code=code,
        output=result.output,
        files=result.files,
        display=next(
            (
                table.display
                for attempt in result.execution_history[-1:]
                for table in attempt.tables
                if table.source == "expression"
            ),
            "",
        ),
    )


def _summary(output: str) -> str:
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    text = " | ".join(lines[:3])
    return text[:300] + ("…" if len(text) > 300 else "")
