"""Tools over HTTP: `python_coder` in its three modes, as the agents call it.

- `code`: run the given code in the session's sandbox (variables persist).
- `generate`: answer `query` with generated, verified and executed code.
- `tdd`: build functions test-first for `query`.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import Response

from backend.api.deps import CurrentUser, ServicesDep
from backend.api.disconnect import unless_disconnected
from backend.api.errors import CLIENT_ERRORS, ApiError
from backend.core.services import Services
from backend.files import UnsupportedFileType, loader_code, plain_loads
from backend.files.catalog import FileNotInWorkspace
from backend.llm.turn import TurnLLM
from backend.models.tools import (
    CoderResponse,
    PythonCoderRequest,
    TDDResponse,
    ToolData,
    ToolMetadata,
    ToolResponse,
)
from backend.storage import User
from backend.storage.sessions import owner_of, session_key
from backend.storage.workspaces import NotARegularFile, UnsafePath
from backend.tools.python_coder.request import CoderRequest
from backend.tools.python_coder.result import new_run_id
from backend.tools.python_coder.steps import FileLoad, SessionStep, file_loads
from backend.tools.python_coder.tdd import solve_tdd
from backend.tools.python_coder.tdd.cache import TDD_CACHE, user_cache_dir
from backend.tools.python_coder.tdd.standalone import standalone_tests
from backend.tools.sandbox.ast_check import check_code
from backend.tools.sandbox.command import SANDBOX_WORKSPACE
from backend.tools.sandbox.executor import BasePythonExecutor, ExecutionResult

router = APIRouter(prefix="/api/tools", tags=["tools"], responses=CLIENT_ERRORS)

_TRUNCATION_NOTICE = "\n[output truncated at 1 MB]"
_HISTORY = 10


@router.post("/python_coder", response_model=None)
async def run_python_coder(
    body: PythonCoderRequest, user: CurrentUser, services: ServicesDep, http: Request
) -> ToolResponse | CoderResponse | TDDResponse | Response:
    """Run code, or answer a question with generated code, in the session's sandbox."""
    key = session_key(user.id, body.session_id)  # namespaced by its owner
    await services.limits.check_disk_for_run(user)  # a 507 once the user's quota is full
    if body.mode == "code":
        return await _run_code(body, key, user, services)
    if services.store.session_owner(key) != user.id:
        raise ApiError(
            404,
            f"Session '{body.session_id}' not found: upload a file to it or chat in it first.",
            code="session_not_found",
        )
    model = await services.llm.resolve_model(body.model or services.llm.default_model)
    llm = TurnLLM.for_backend(
        services.llm, model, services.audit, user=user.username, session_id=key
    )
    executor = _executor(services, key)
    await services.shared.pull(key)
    if body.mode == "tdd":
        return await unless_disconnected(http, _run_tdd(body, key, services, llm, executor))
    return await unless_disconnected(http, _run_generate(body, key, user, services, llm, executor))


def _executor(services: Services, session_id: str) -> BasePythonExecutor:
    try:
        return services.executors.get_python_executor(session_id)
    except (ImportError, RuntimeError) as exc:
        raise ApiError(503, str(exc), code="executor_unavailable") from None


async def _run_generate(
    body: PythonCoderRequest,
    key: str,
    user: User,
    services: Services,
    llm: TurnLLM,
    executor: BasePythonExecutor,
) -> CoderResponse:
    conversation = services.store.conversation_for_session(user.id, key, "")
    history = [
        (message.role, message.content)
        for message in services.store.list_messages(conversation.id)[-_HISTORY:]
    ]
    request = CoderRequest(
        session_id=key,
        query=body.query or "",
        files=body.files,
        file_paths=body.file_paths,
        history=history,
    )
    try:
        result = await services.coder.run(request, llm, executor)
    except FileNotInWorkspace as exc:
        raise ApiError(
            404, f"File not found in the session: {exc}", code="file_not_found"
        ) from None
    except UnsupportedFileType as exc:
        raise ApiError(415, str(exc), code="unsupported_file_type") from None
    except (UnsafePath, NotARegularFile) as exc:
        raise ApiError(400, f"Invalid file path: {exc}", code="bad_path") from None
    services.audit.tool_run(
        tool="python_coder",
        mode="generate",
        user=user.username,
        session_id=key,
        query=body.query,
        code=result.code,
        success=result.success,
        error=result.error,
        files=result.files,
        iterations=result.iterations,
        attempts=len(result.execution_history),
        llm_calls=result.llm_calls,
        execution_time=result.execution_time,
    )
    return CoderResponse(
        **result.model_dump(), session_id=body.session_id, workspace=SANDBOX_WORKSPACE
    )


async def _run_tdd(
    body: PythonCoderRequest,
    key: str,
    services: Services,
    llm: TurnLLM,
    executor: BasePythonExecutor,
) -> TDDResponse:
    """Build the functions test-first; a solution that passes its tests joins the session's
    steps with its tests (the TDD run itself leaves the session's variables as they were)."""
    settings = services.settings
    solution = await solve_tdd(
        body.query or "",
        llm,
        executor,
        user_cache_dir(settings.DATA_DIR / TDD_CACHE, owner_of(key)),
        max_iterations=settings.PYTHON_CODE_MAX_ITERATIONS,
        settings_key={"prefilter": settings.AST_PREFILTER, "timeout": settings.PYTHON_CODE_TIMEOUT},
    )
    if solution.all_tests_passed and not solution.error:
        step = SessionStep(
            kind="tdd",
            run_id=new_run_id(),
            question=body.query or "",
            code=solution.code,
            tests=standalone_tests(solution.tests),
            output=f"{len(solution.tests)} of {len(solution.tests)} tests passed",
        )
        await services.steps.record(key, step)
    return TDDResponse.from_solution(solution)


async def _run_code(
    body: PythonCoderRequest, key: str, user: User, services: Services
) -> ToolResponse:
    started = time.monotonic()
    code = body.code or ""
    services.store.conversation_for_session(user.id, key, f"Session {body.session_id}")
    services.workspaces.ensure(key)
    problems = check_code(code) if services.settings.AST_PREFILTER else []
    if problems:
        result = ExecutionResult(
            success=False, error="The code was not run:\n" + "\n".join(problems)
        )
    else:
        executor = _executor(services, key)
        await services.shared.pull(key)
        result, loads = await _load_files(body, key, services, executor)
        if result.success:
            result = await executor.run(code, body.timeout)
        if result.success:
            step = SessionStep(
                kind="code",
                run_id=new_run_id(),
                loads=loads,
                code=code,
                output=result.stdout,
                files=result.files,
            )
            await services.steps.record(key, step)
    stdout = result.stdout + (_TRUNCATION_NOTICE if result.truncated else "")
    response = ToolResponse(
        success=result.success,
        answer=_answer(result),
        data=ToolData(
            stdout=stdout,
            stderr=result.stderr,
            files=result.files,
            workspace=SANDBOX_WORKSPACE,  # as the code sees it: no server path on the wire
            returncode=0 if result.success else 1,
        ),
        metadata=ToolMetadata(
            execution_time=time.monotonic() - started,
            code_execution_time=result.execution_time,
            variables=result.variables,
            truncated=result.truncated,
        ),
        error=result.error,
    )
    services.audit.tool_run(
        tool="python_coder",
        mode="code",
        user=user.username,
        session_id=key,
        code=code,
        success=result.success,
        error=result.error,
        files=result.files,
        execution_time=response.metadata.execution_time,
    )
    return response


async def _load_files(
    body: PythonCoderRequest, key: str, services: Services, executor: BasePythonExecutor
) -> tuple[ExecutionResult, list[FileLoad]]:
    """Load `file_paths` into their variables before the code runs; also how a notebook
    loads them."""
    if not body.file_paths:
        return ExecutionResult(success=True), []
    mapping, files = {}, []
    for name, variable in body.file_paths.items():
        try:
            metadata = await services.catalog.usable(key, name)
        except FileNotInWorkspace:
            raise ApiError(
                404, f"File not found in the session: {name}", code="file_not_found"
            ) from None
        except UnsupportedFileType as exc:
            raise ApiError(415, str(exc), code="unsupported_file_type") from None
        except (UnsafePath, NotARegularFile):
            raise ApiError(400, f"Invalid file path: {name}", code="bad_path") from None
        mapping[metadata.name] = variable
        files.append(metadata)
    loaded = await executor.run(loader_code(mapping, files), body.timeout)
    if not loaded.success:
        loaded.error = f"Loading file_paths failed:\n{loaded.error}"
    return loaded, file_loads(plain_loads(mapping, files))


def _answer(result: ExecutionResult) -> str:
    if not result.success:
        return f"The code failed:\n{result.error}"
    output = result.stdout.strip()
    summary = output[:2000] + ("…" if len(output) > 2000 else "") or "The code ran without output."
    if result.files:
        summary += "\nFiles: " + ", ".join(result.files)
    return summary
