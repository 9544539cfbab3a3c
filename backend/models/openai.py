"""The OpenAI chat-completions wire format, request and response.

Responses are built as plain dicts: they sit on the streaming hot path, and
their shape is fixed by OpenAI's API, not by us.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from backend.core.router import AgentType
from backend.llm import GenerationOptions
from backend.llm.schema_bounds import check_schema
from backend.models.common import SessionId, Text
from backend.models.data_sources import DataSourceIds

# A schema a reply is constrained to: it becomes a grammar, so it is bounded (a 400 past).
JsonSchema = Annotated[dict[str, Any], AfterValidator(check_schema)]


class TextPart(BaseModel):
    type: Literal["text"]
    text: Text


class FunctionCallIn(BaseModel):
    name: Text
    arguments: Text = "{}"


class ToolCallIn(BaseModel):
    id: Text
    type: Literal["function"] = "function"
    function: FunctionCallIn


class ChatMessageIn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | list[TextPart] | None = None
    tool_calls: list[ToolCallIn] | None = None  # an assistant's calls of the client's tools
    tool_call_id: Text | None = None  # a tool message answers this call

    @model_validator(mode="after")
    def _tool_results_name_their_call(self) -> ChatMessageIn:
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")
        return self

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(part.text for part in self.content)
        return self.content or ""


class FunctionSpec(BaseModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: Text | None = None
    parameters: JsonSchema | None = None  # a required call is decoded under it
    strict: bool | None = None


class ToolSpec(BaseModel):
    type: Literal["function"]
    function: FunctionSpec

    @field_validator("type", mode="before")
    @classmethod
    def _a_chat_completions_tool(cls, value: Any) -> Any:
        # Said in OpenAI's words (errors.py answers them as they are): a client that sends a
        # Responses tool such as code_interpreter gets the same 400 from us as from OpenAI.
        if value == "custom":
            raise PydanticCustomError(
                "unsupported_value",
                "Unsupported value: 'custom' tools are not supported by this server; "
                "declare the tool as a 'function'.",
            )
        if value != "function":
            raise PydanticCustomError(
                "invalid_value",
                "Invalid value: {value}. Supported values are: 'function' and 'custom'.",
                {"value": repr(value)},
            )
        return value


class NamedFunction(BaseModel):
    name: Text


class NamedToolChoice(BaseModel):
    type: Literal["function"]
    function: NamedFunction


class StreamOptions(BaseModel):
    include_usage: bool = False


class JsonSchemaFormat(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    name: Text = Field(min_length=1, max_length=64)
    description: Text | None = None
    schema_: JsonSchema | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(BaseModel):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None

    @model_validator(mode="after")
    def _schema_when_asked(self) -> ResponseFormat:
        if self.type == "json_schema" and self.json_schema is None:
            raise ValueError("a json_schema response format needs its json_schema")
        return self


# Parameters OpenAI defines that change nothing in the answer, so accepting them hides nothing.
_INFORMATIONAL = {"user", "store", "metadata", "service_tier", "safety_identifier",
                  "prompt_cache_key"}  # fmt: skip


class ChatCompletionRequest(BaseModel):
    # Extra fields are kept so that `unsupported_parameter` can name them: a parameter
    # the server cannot honour is refused, never silently ignored.
    model_config = ConfigDict(extra="allow")

    model: Text = Field(min_length=1)
    messages: list[ChatMessageIn] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    stop: Text | list[Text] | None = None
    seed: int | None = None
    frequency_penalty: float | None = Field(default=None, ge=-2, le=2)
    presence_penalty: float | None = Field(default=None, ge=-2, le=2)
    response_format: ResponseFormat | None = None
    tools: list[ToolSpec] | None = Field(default=None, max_length=128)
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(default=None, ge=0, le=20)
    n: int = Field(default=1, ge=1, le=1, description="Only one choice is supported.")
    # Extensions: which agent answers, and which stored session to continue.
    agent_type: AgentType = "auto"
    session_id: SessionId | None = None
    data_sources: DataSourceIds = Field(
        default=None,
        max_length=64,
        description="Attach exactly these data sources (ids from /api/data-sources) to the"
        " session before the turn; needs session_id",
    )

    def langchain_messages(self) -> list[BaseMessage]:
        converted: list[BaseMessage] = []
        for message in self.messages:
            if message.role in ("system", "developer"):
                converted.append(SystemMessage(message.text))
            elif message.role == "user":
                converted.append(HumanMessage(message.text))
            elif message.role == "tool":
                converted.append(ToolMessage(message.text, tool_call_id=message.tool_call_id or ""))
            else:
                calls = [
                    {"id": c.id, "name": c.function.name, "args": _arguments(c.function.arguments)}
                    for c in message.tool_calls or []
                ]
                converted.append(AIMessage(message.text, tool_calls=calls))
        return converted

    @model_validator(mode="after")
    def _tool_choice_names_a_tool(self) -> ChatCompletionRequest:
        if self.tool_choice is not None and self.tool_choice != "none" and not self.tools:
            raise ValueError("tool_choice needs tools")
        if isinstance(self.tool_choice, NamedToolChoice):
            name = self.tool_choice.function.name
            if name not in [tool.function.name for tool in self.tools or []]:
                raise ValueError(f"tool_choice names '{name}', which is not among the tools")
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs: true")
        return self

    @property
    def client_tools(self) -> tuple[list[dict[str, Any]], str | dict[str, Any]] | None:
        """The tools as sent and the choice among them; None without tools."""
        if not self.tools:
            return None
        choice = self.tool_choice or "auto"
        return (
            [tool.model_dump(exclude_none=True) for tool in self.tools],
            choice if isinstance(choice, str) else choice.model_dump(),
        )

    @property
    def stop_list(self) -> list[str] | None:
        return [self.stop] if isinstance(self.stop, str) else self.stop

    @property
    def response_format_dict(self) -> dict[str, Any] | None:
        """The response format in OpenAI's shape; None for plain text."""
        if self.response_format is None or self.response_format.type == "text":
            return None
        return self.response_format.model_dump(by_alias=True, exclude_none=True)

    def generation_options(self) -> GenerationOptions:
        """The sampling and output parameters, as every backend takes them."""
        return GenerationOptions(
            temperature=self.temperature,
            top_p=self.top_p,
            max_tokens=self.max_completion_tokens or self.max_tokens,
            stop=self.stop_list,
            seed=self.seed,
            frequency_penalty=self.frequency_penalty,
            presence_penalty=self.presence_penalty,
            response_format=self.response_format_dict,
            logprobs=bool(self.logprobs),
            top_logprobs=self.top_logprobs,
        )

    def unsupported_parameter(self) -> str | None:
        """The first parameter this server would have to ignore, if any."""
        return first_unsupported(self.model_extra or {})


class EmbeddingRequest(BaseModel):
    model_config = ConfigDict(extra="allow")  # passed on to an OpenAI upstream, else refused

    model: Text = Field(min_length=1)
    input: Text | list[Text] = Field(min_length=1)
    encoding_format: Literal["float", "base64"] = "float"
    user: Text | None = None

    @property
    def texts(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else self.input

    @property
    def extra(self) -> dict[str, Any]:
        return {k: v for k, v in (self.model_extra or {}).items() if v is not None}


def first_unsupported(extra: dict[str, Any]) -> str | None:
    """The first of a request's unknown parameters that would change the answer, if any."""
    for name, value in extra.items():
        if value is None or name in _INFORMATIONAL:
            continue
        if name in ("logprobs", "parallel_tool_calls") and value is False:
            continue  # asking for the default
        if name == "top_logprobs" and value == 0:
            continue
        return name
    return None


def _arguments(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {"arguments": text}
    return value if isinstance(value, dict) else {"value": value}
