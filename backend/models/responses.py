"""OpenAI's Responses API (`POST /v1/responses`), request and response shapes.

Input is a string or a list of items (messages, function calls and their
outputs); function tools are flat (`{"type": "function", "name", ...}`).
Everything maps onto a chat turn, so the same agents and backends answer.
The `code_interpreter` tool names a container (one of our sessions) for the
agents' Python, instead of the client's own functions.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from backend.core.router import AgentType
from backend.llm import GenerationOptions
from backend.models.common import SessionId, Text
from backend.models.data_sources import DataSourceIds
from backend.models.openai import JsonSchema, first_unsupported


class ContentPart(BaseModel):
    type: Literal["input_text", "output_text", "text"]
    text: Text


class MessageItem(BaseModel):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: Text | list[ContentPart]

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class FunctionCallItem(BaseModel):
    type: Literal["function_call"]
    call_id: Text
    name: Text
    arguments: Text = "{}"
    id: Text | None = None
    status: Text | None = None


class FunctionCallOutputItem(BaseModel):
    type: Literal["function_call_output"]
    call_id: Text
    output: Text


class FunctionTool(BaseModel):
    type: Literal["function"]
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: Text | None = None
    parameters: JsonSchema | None = None
    strict: bool | None = None


# A container's or a file's id: it becomes part of a path or a lookup, so it is bounded.
ObjectId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")]
# What `include` may ask for (the SDK's `ResponseIncludable`); only the code
# interpreter's outputs change what this server sends.
Includable = Literal[
    "file_search_call.results",
    "web_search_call.results",
    "web_search_call.action.sources",
    "message.input_image.image_url",
    "computer_call_output.output.image_url",
    "code_interpreter_call.outputs",
    "reasoning.encrypted_content",
    "message.output_text.logprobs",
]


class AutoContainer(BaseModel):
    """A new container for the request, with these uploaded files in it."""

    type: Literal["auto"]
    file_ids: list[ObjectId] = Field(default_factory=list, max_length=50)
    memory_limit: Literal["1g", "4g", "16g", "64g"] | None = None


class CodeInterpreterTool(BaseModel):
    type: Literal["code_interpreter"]
    container: ObjectId | AutoContainer


Tool = Annotated[FunctionTool | CodeInterpreterTool, Field(discriminator="type")]


class HostedToolChoice(BaseModel):
    """`{"type": "code_interpreter"}`: the turn uses the code interpreter (as it does)."""

    type: Literal["code_interpreter"]


class NamedFunctionChoice(BaseModel):
    type: Literal["function"]
    name: Text


class TextFormat(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    type: Literal["text", "json_object", "json_schema"]
    name: Text | None = None
    schema_: JsonSchema | None = Field(default=None, alias="schema")
    strict: bool | None = None


class TextOptions(BaseModel):
    format: TextFormat | None = None


class ResponseRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # named in a 400 by `unsupported_parameter`

    model: Text = Field(min_length=1)
    input: Text | list[MessageItem | FunctionCallItem | FunctionCallOutputItem] = Field(
        min_length=1
    )
    instructions: Text | None = None
    stream: bool = False
    previous_response_id: Text | None = None
    tools: list[Tool] | None = Field(default=None, max_length=128)
    tool_choice: (
        Literal["none", "auto", "required"] | NamedFunctionChoice | HostedToolChoice | None
    ) = None
    parallel_tool_calls: bool | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_output_tokens: int | None = Field(default=None, ge=1)
    text: TextOptions | None = None
    include: list[Includable] | None = Field(default=None, max_length=16)
    # Extensions, as on chat completions.
    agent_type: AgentType = "auto"
    session_id: SessionId | None = None
    data_sources: DataSourceIds = Field(
        default=None,
        max_length=64,
        description="Attach exactly these data sources (ids from /api/data-sources) to the"
        " session before the turn; needs session_id",
    )

    def unsupported_parameter(self) -> str | None:
        return first_unsupported(self.model_extra or {})

    def messages(self) -> list[BaseMessage]:
        converted: list[BaseMessage] = []
        if self.instructions:
            converted.append(SystemMessage(self.instructions))
        items = (
            [MessageItem(role="user", content=self.input)]
            if isinstance(self.input, str)
            else self.input
        )
        names: dict[str, str] = {}
        for item in items:
            if isinstance(item, MessageItem):
                if item.role in ("system", "developer"):
                    converted.append(SystemMessage(item.text))
                elif item.role == "user":
                    converted.append(HumanMessage(item.text))
                else:
                    converted.append(AIMessage(item.text))
            elif isinstance(item, FunctionCallItem):
                names[item.call_id] = item.name
                call = {"id": item.call_id, "name": item.name, "args": _object(item.arguments)}
                converted.append(AIMessage("", tool_calls=[call]))
            else:
                converted.append(ToolMessage(item.output, tool_call_id=item.call_id))
        return converted

    @property
    def code_interpreter(self) -> CodeInterpreterTool | None:
        """The code interpreter tool, if the request gives one."""
        return next((t for t in self.tools or [] if isinstance(t, CodeInterpreterTool)), None)

    @property
    def include_code_interpreter_outputs(self) -> bool:
        return "code_interpreter_call.outputs" in (self.include or [])

    def tool_conflict(self) -> str | None:
        """Why the tools cannot be served together, if they cannot: the code interpreter
        runs in our agents, the client's functions in plain chat, so a turn has one or the other."""
        interpreters = sum(isinstance(t, CodeInterpreterTool) for t in self.tools or [])
        if isinstance(self.tool_choice, HostedToolChoice) and not interpreters:
            return "tool_choice names code_interpreter, which is not among the tools."
        if interpreters > 1:
            return "Only one code_interpreter tool may be given."
        if interpreters and len(self.tools or []) > interpreters:
            return "The code_interpreter tool cannot be combined with function tools."
        return None

    @property
    def client_tools(self) -> tuple[list[dict[str, Any]], str | dict[str, Any]] | None:
        """The tools in chat-completions shape, and the choice among them."""
        functions = [t for t in self.tools or [] if isinstance(t, FunctionTool)]
        if not functions:
            return None
        tools = [
            {"type": "function", "function": t.model_dump(exclude={"type"}, exclude_none=True)}
            for t in functions
        ]
        choice = self.tool_choice or "auto"
        if isinstance(choice, HostedToolChoice):  # a conflict (`tool_conflict`): never here
            choice = "auto"
        if isinstance(choice, NamedFunctionChoice):
            return tools, {"type": "function", "function": {"name": choice.name}}
        return tools, choice

    def generation_options(self) -> GenerationOptions:
        """The sampling and output parameters, as every backend takes them."""
        return GenerationOptions(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_output_tokens,
            response_format=self.response_format,
        )

    @property
    def response_format(self) -> dict[str, Any] | None:
        """`text.format` in chat-completions shape; None for plain text."""
        spec = self.text.format if self.text else None
        if spec is None or spec.type == "text":
            return None
        if spec.type == "json_object":
            return {"type": "json_object"}
        schema = {"name": spec.name or "response", "schema": spec.schema_ or {"type": "object"}}
        return {"type": "json_schema", "json_schema": schema}


def _object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {"arguments": text}
    return value if isinstance(value, dict) else {"value": value}
