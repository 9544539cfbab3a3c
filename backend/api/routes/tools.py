"""Tools over HTTP: `python_coder` in its three modes, as the agents call it.

- `code`: run the given code in the session's sandbox (variables persist).
- `generate`: answer `query` with generated, verified and executed code.
- `tdd`: build functions test-first for `query`.

The work is `backend/core/python_coder_service.py`; its errors become HTTP in
`backend/api/errors.py`.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from backend.api.deps import CurrentUser, PythonCoderDep
from backend.api.disconnect import unless_disconnected
from backend.api.errors import CLIENT_ERRORS
from backend.core.python_coder_service import CodeRun
from backend.models.tools import (
    CoderResponse,
    PythonCoderRequest,
    TDDResponse,
    ToolData,
    ToolMetadata,
    ToolResponse,
)
from backend.tools.sandbox.command import SANDBOX_WORKSPACE
from backend.tools.sandbox.executor import ExecutionResult

router = APIRouter(prefix="/api/tools", tags=["tools"], responses=CLIENT_ERRORS)

_TRUNCATION_NOTICE = "\n[output truncated at 1 MB]"


@router.post("/python_coder", response_model=None)
async def run_python_coder(
    body: PythonCoderRequest, user: CurrentUser, coder: PythonCoderDep, http: Request
) -> ToolResponse | CoderResponse | TDDResponse | Response:
    """Run code, or answer a question with generated code, in the session's sandbox."""
    if body.mode == "code":
        run = await coder.run_code(
            user, body.session_id, body.code or "", body.file_paths, body.timeout
        )
        return _tool_response(run)
    query = body.query or ""
    if body.mode == "tdd":
        solving = coder.solve_tdd(user, body.session_id, query, model=body.model)
        return TDDResponse.from_solution(await unless_disconnected(http, solving))
    answering = coder.generate(
        user,
        body.session_id,
        query,
        files=body.files,
        file_paths=body.file_paths,
        model=body.model,
    )
    result = await unless_disconnected(http, answering)
    return CoderResponse(
        **result.model_dump(), session_id=body.session_id, workspace=SANDBOX_WORKSPACE
    )


def _tool_response(run: CodeRun) -> ToolResponse:
    result = run.result
    return ToolResponse(
        success=result.success,
        answer=_answer(result),
        data=ToolData(
            stdout=result.stdout + (_TRUNCATION_NOTICE if result.truncated else ""),
            stderr=result.stderr,
            files=result.files,
            workspace=SANDBOX_WORKSPACE,  # as the code sees it: no server path on the wire
            returncode=0 if result.success else 1,
        ),
        metadata=ToolMetadata(
            execution_time=run.execution_time,
            code_execution_time=result.execution_time,
            variables=result.variables,
            truncated=result.truncated,
        ),
        error=result.error,
    )


def _answer(result: ExecutionResult) -> str:
    if not result.success:
        return f"The code failed:\n{result.error}"
    output = result.stdout.strip()
    summary = output[:2000] + ("…" if len(output) > 2000 else "") or "The code ran without output."
    if result.files:
        summary += "\nFiles: " + ", ".join(result.files)
    return summary
