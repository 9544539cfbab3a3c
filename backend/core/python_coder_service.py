"""python_coder for one user's session: run code, or answer a question with code.

What `POST /api/tools/python_coder` does below the wire, in its three modes:

- `run_code`: load the requested files into variables, run the code as given in the
  session's sandbox (its variables persist), and record a successful run as a step;
- `generate`: answer a question with generated, verified and executed code, reading
  the conversation so far;
- `solve_tdd`: build functions test-first; a solution that passes its tests joins the
  session's steps with its tests (the TDD run leaves the session's variables as they were).

Every run is written to the audit log. Failures the caller must hear of are domain
errors (`UnknownSession`, `ExecutorUnavailable`, and the files layer's
`FileNotInWorkspace`, `UnsupportedFileType`, `UnsafePath`, `NotARegularFile`); the API
maps each to its HTTP answer once, in `backend/api/errors.py`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from backend.config import Settings
from backend.core.group_rights import GroupRights
from backend.core.limits import Limits
from backend.core.step_log import StoreStepLog
from backend.core.usage import llm_counts
from backend.files import loader_code, plain_loads
from backend.files.catalog import WorkspaceCatalog
from backend.llm import LLMBackend
from backend.llm.turn import TurnLLM
from backend.storage import Store, User
from backend.storage.audit import AuditLog
from backend.storage.sessions import SessionKey, owner_of, session_key
from backend.storage.shared import SharedWorkspaces
from backend.storage.workspaces import Workspaces
from backend.tools.python_coder.coder import PythonCoder
from backend.tools.python_coder.request import CoderRequest
from backend.tools.python_coder.result import CoderResult, new_run_id
from backend.tools.python_coder.steps import FileLoad, SessionStep, file_loads
from backend.tools.python_coder.tdd import solve_tdd
from backend.tools.python_coder.tdd.cache import TDD_CACHE, user_cache_dir
from backend.tools.python_coder.tdd.models import TDDSolution
from backend.tools.python_coder.tdd.standalone import standalone_tests
from backend.tools.sandbox.ast_check import check_code
from backend.tools.sandbox.executor import BasePythonExecutor, ExecutionResult
from backend.tools.sandbox.pool import SessionExecutors

_HISTORY = 10  # the conversation's last messages that `generate` reads


class UnknownSession(LookupError):
    """A question for a session the user never started: there is nothing in it to read."""

    def __init__(self, session_id: str) -> None:
        super().__init__(session_id)
        self.session_id = session_id  # the client's id, never the key


class ExecutorUnavailable(RuntimeError):
    """The session's sandbox cannot start (a missing package, a backend that is down)."""


@dataclass(frozen=True)
class CodeRun:
    """The outcome of `run_code`: the run's result (or the loading's, if that failed)."""

    result: ExecutionResult
    execution_time: float  # the whole request, loading the files included


@dataclass(eq=False)
class PythonCoderService:
    settings: Settings
    store: Store
    llm: LLMBackend
    audit: AuditLog
    executors: SessionExecutors
    shared: SharedWorkspaces
    workspaces: Workspaces
    catalog: WorkspaceCatalog
    coder: PythonCoder
    steps: StoreStepLog
    limits: Limits

    async def run_code(
        self,
        user: User,
        session_id: str,
        code: str,
        file_paths: dict[str, str] | None = None,
        time_limit: float | None = None,  # seconds, in the sandbox; None: its default
    ) -> CodeRun:
        """Run `code` as given, after loading `file_paths` (name -> variable); the session
        starts here if it is new."""
        started = time.monotonic()
        key = session_key(user.id, session_id)
        await self.limits.check_daily(user, tokens=False)  # a 429 past today's sandbox time
        await self.limits.check_disk_for_run(user)  # a 507 once the user's quota is full
        self.store.conversation_for_session(user.id, key, f"Session {session_id}")
        self.workspaces.ensure(key)
        problems = check_code(code) if self.settings.AST_PREFILTER else []
        if problems:
            error = "The code was not run:\n" + "\n".join(problems)
            result = ExecutionResult(success=False, error=error)
        else:
            result = await self._run(key, code, file_paths, time_limit)
        run = CodeRun(result=result, execution_time=time.monotonic() - started)
        self.audit.tool_run(
            tool="python_coder",
            mode="code",
            user=user.username,
            session_id=key,
            code=code,
            success=result.success,
            error=result.error,
            files=result.files,
            execution_time=run.execution_time,
        )
        return run

    async def _run(
        self,
        key: SessionKey,
        code: str,
        file_paths: dict[str, str] | None,
        time_limit: float | None,
    ) -> ExecutionResult:
        executor = self._executor(key)
        await self.shared.pull(key)
        result, loads = await self._load_files(key, executor, file_paths or {}, time_limit)
        if result.success:
            result = await executor.run(code, time_limit)
        if result.success:
            step = SessionStep(
                kind="code",
                run_id=new_run_id(),
                loads=loads,
                code=code,
                output=result.stdout,
                files=result.files,
            )
            await self.steps.record(key, step)
        return result

    async def _load_files(
        self,
        key: SessionKey,
        executor: BasePythonExecutor,
        file_paths: dict[str, str],
        time_limit: float | None,
    ) -> tuple[ExecutionResult, list[FileLoad]]:
        """Load each file into its variable before the code runs; also how a notebook
        loads them."""
        if not file_paths:
            return ExecutionResult(success=True), []
        mapping, files = {}, []
        for name, variable in file_paths.items():
            metadata = await self.catalog.usable(key, name)
            mapping[metadata.name] = variable
            files.append(metadata)
        loaded = await executor.run(loader_code(mapping, files), time_limit)
        if not loaded.success:
            loaded.error = f"Loading file_paths failed:\n{loaded.error}"
        return loaded, file_loads(plain_loads(mapping, files))

    async def generate(
        self,
        user: User,
        session_id: str,
        query: str,
        *,
        files: list[str] | None = None,
        file_paths: dict[str, str] | None = None,
        model: str = "",
    ) -> CoderResult:
        """Answer `query` with generated, verified and executed code."""
        key, llm, executor = await self._open(user, session_id, model)
        conversation = self.store.conversation_for_session(user.id, key, "")
        history = [
            (message.role, message.content)
            for message in self.store.list_messages(conversation.id)[-_HISTORY:]
        ]
        request = CoderRequest(
            session_id=key, query=query, files=files, file_paths=file_paths, history=history
        )
        try:
            result = await self.coder.run(request, llm, executor)
        finally:
            self.limits.usage.add(user.id, llm_counts(llm.usage))
        self.audit.tool_run(
            tool="python_coder",
            mode="generate",
            user=user.username,
            session_id=key,
            query=query,
            code=result.code,
            success=result.success,
            error=result.error,
            files=result.files,
            iterations=result.iterations,
            attempts=len(result.execution_history),
            llm_calls=result.llm_calls,
            execution_time=result.execution_time,
        )
        return result

    async def solve_tdd(
        self, user: User, session_id: str, query: str, *, model: str = ""
    ) -> TDDSolution:
        """Build the functions `query` asks for test-first."""
        key, llm, executor = await self._open(user, session_id, model)
        settings = self.settings
        try:
            solution = await solve_tdd(
                query,
                llm,
                executor,
                user_cache_dir(settings.DATA_DIR / TDD_CACHE, owner_of(key)),
                max_iterations=settings.PYTHON_CODE_MAX_ITERATIONS,
                settings_key={
                    "prefilter": settings.AST_PREFILTER,
                    "timeout": settings.PYTHON_CODE_TIMEOUT,
                },
            )
        finally:
            self.limits.usage.add(user.id, llm_counts(llm.usage))
        if solution.all_tests_passed and not solution.error:
            passed = len(solution.tests)
            step = SessionStep(
                kind="tdd",
                run_id=new_run_id(),
                question=query,
                code=solution.code,
                tests=standalone_tests(solution.tests),
                output=f"{passed} of {passed} tests passed",
            )
            await self.steps.record(key, step)
        return solution

    async def _open(
        self, user: User, session_id: str, model: str
    ) -> tuple[SessionKey, TurnLLM, BasePythonExecutor]:
        """The session's key, the turn's LLM client and the session's sandbox, its workspace
        brought up to date; `UnknownSession` if the user has no such session."""
        key = session_key(user.id, session_id)
        await self.limits.check_daily(user)
        await self.limits.check_disk_for_run(user)
        if self.store.session_owner(key) != user.id:
            raise UnknownSession(session_id)
        name = await GroupRights(self.store, self.llm).model_for(user, model)
        profile = (await self.llm.abilities(name)).profile
        llm = TurnLLM.for_backend(
            self.llm, name, self.audit, user=user.username, session_id=key, profile=profile
        )
        executor = self._executor(key)
        await self.shared.pull(key)
        return key, llm, executor

    def _executor(self, key: SessionKey) -> BasePythonExecutor:
        try:
            return self.executors.get_python_executor(key)
        except (ImportError, RuntimeError) as exc:
            raise ExecutorUnavailable(str(exc)) from None
