"""Tools over HTTP: run code in the session's sandbox, as the agents' tool does."""

from __future__ import annotations

import time

from fastapi import APIRouter

from backend.api.deps import CurrentUser, ServicesDep
from backend.api.errors import ApiError
from backend.models.tools import PythonCoderRequest, ToolData, ToolMetadata, ToolResponse
from backend.tools.sandbox.ast_check import check_code
from backend.tools.sandbox.executor import ExecutionResult

router = APIRouter(prefix="/api/tools", tags=["tools"])

_TRUNCATION_NOTICE = "\n[output truncated at 1 MB]"


def _answer(result: ExecutionResult) -> str:
    if not result.success:
        return f"The code failed:\n{result.error}"
    output = result.stdout.strip()
    summary = output[:2000] + ("…" if len(output) > 2000 else "") or "The code ran without output."
    if result.files:
        summary += "\nFiles: " + ", ".join(result.files)
    return summary


@router.post("/python_coder")
async def run_python_coder(
    body: PythonCoderRequest, user: CurrentUser, services: ServicesDep
) -> ToolResponse:
    """Run the given code in the session's sandbox; variables persist between calls."""
    started = time.monotonic()
    services.store.conversation_for_session(user.id, body.session_id, f"Session {body.session_id}")
    workspace = services.workspaces.ensure(body.session_id)
    problems = check_code(body.code) if services.settings.AST_PREFILTER else []
    if problems:
        result = ExecutionResult(
            success=False, error="The code was not run:\n" + "\n".join(problems)
        )
    else:
        try:
            executor = services.executors.get_python_executor(body.session_id)
            result = await executor.run(body.code, body.timeout)
        except (ImportError, RuntimeError) as exc:
            raise ApiError(503, str(exc), code="executor_unavailable") from None
    stdout = result.stdout + (_TRUNCATION_NOTICE if result.truncated else "")
    response = ToolResponse(
        success=result.success,
        answer=_answer(result),
        data=ToolData(
            stdout=stdout,
            stderr=result.stderr,
            files=result.files,
            workspace=str(workspace),
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
        session_id=body.session_id,
        code=body.code,
        success=result.success,
        error=result.error,
        files=result.files,
        execution_time=response.metadata.execution_time,
    )
    return response
