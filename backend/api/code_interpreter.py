"""`/v1/responses` with OpenAI's `code_interpreter` tool: which container (which of the
user's sessions) the turn's code runs in, and how its calls are sent back.

`container` is a container's id, or `{"type": "auto", "file_ids": [...]}`: a new container
with copies of those files, or, continuing a response (`previous_response_id`), that
conversation's own container (made now if it has none, or if its one expired). An id
given with `previous_response_id` must be that conversation's container: a turn's
history and its data live in one session.
"""

from __future__ import annotations

from backend.api.bodies import UploadQuota
from backend.api.encoders.code_interpreter import CodeInterpreterOutput
from backend.api.errors import ApiError
from backend.api.upload_checks import check_room, stored_file_errors
from backend.core.containers import ContainerExpired, Containers, container_file_id
from backend.core.router import AgentType
from backend.models.responses import CodeInterpreterTool, ResponseRequest
from backend.storage.openai_objects import Container
from backend.storage.sessions import SessionKey

AUTO_NAME = "code_interpreter"


def check_tools(body: ResponseRequest) -> None:
    """A 400 for tools that cannot be served together."""
    conflict = body.tool_conflict()
    if conflict is not None:
        param = "tool_choice" if conflict.startswith("tool_choice") else "tools"
        raise ApiError(400, conflict, code="invalid_value", param=param)


def interpreter_agent(body: ResponseRequest) -> AgentType:
    """The agent that runs the code: ReAct unless the request asks for Plan-and-Execute;
    a 400 for a request the tool cannot serve."""
    if body.agent_type == "chat":
        raise ApiError(
            400,
            "The code_interpreter tool runs code through an agent: use agent_type 'react' "
            "(the default with this tool) or 'plan_execute', not 'chat'.",
            code="invalid_value",
            param="agent_type",
        )
    if body.session_id is not None:
        raise ApiError(
            400,
            "session_id cannot be combined with the code_interpreter tool: its container is "
            "the session.",
            code="invalid_value",
            param="session_id",
        )
    return "react" if body.agent_type == "auto" else body.agent_type


async def interpreter_container(
    containers: Containers,
    quota: UploadQuota,
    tool: CodeInterpreterTool,
    continued: SessionKey | None,
) -> Container:
    """The container the turn runs in, active now. `continued`: the session key of the
    conversation `previous_response_id` continues."""
    user_id = quota.user.id
    if not isinstance(tool.container, str):
        await check_room(quota, containers.files, user_id, list(tool.container.file_ids))
    with stored_file_errors():
        return await _container(containers, user_id, tool, continued)


async def _container(
    containers: Containers, user_id: int, tool: CodeInterpreterTool, continued: SessionKey | None
) -> Container:
    if isinstance(tool.container, str):
        container = await containers.usable(user_id, tool.container)
        if continued is not None and container.session_key != continued:
            raise ApiError(
                400,
                f"Container {container.id} is not the one of the response being continued "
                "(previous_response_id): continue it with its own container, or with "
                '{"type": "auto"}.',
                code="invalid_value",
                param="tools",
            )
        return container
    file_ids = list(tool.container.file_ids)
    existing = containers.of_session(continued) if continued is not None else None
    if existing is None or existing.expired_at is not None:
        return await containers.create(
            user_id, AUTO_NAME, file_ids, session=continued, titled=False
        )
    try:
        container = await containers.usable(user_id, existing.id)
    except ContainerExpired:
        return await containers.create(
            user_id, AUTO_NAME, file_ids, session=continued, titled=False
        )
    for file_id in file_ids:
        await containers.add_user_file(user_id, container, file_id)
    return container


def interpreter_output(
    container_id: str, base_url: str, body: ResponseRequest
) -> CodeInterpreterOutput:
    """How the turn's runs are sent: their files as the container's, by id and by URL."""
    base = base_url.rstrip("/")

    def file_id(path: str) -> str:
        return container_file_id(container_id, path)

    def file_url(path: str) -> str:
        return f"{base}/v1/containers/{container_id}/files/{file_id(path)}/content"

    return CodeInterpreterOutput(
        container_id=container_id,
        file_id=file_id,
        file_url=file_url,
        include_outputs=body.include_code_interpreter_outputs,
    )
