"""An MCP server's tool as one of the agents' tools: `<server>__<tool>`.

The agents give every tool one text input. An MCP tool takes a JSON object, so the
input is read as one (bare, fenced, or inside prose); a tool with a single text
argument also takes plain words; otherwise the model is asked once to fill the
tool's arguments from the input, under the tool's own schema. The server's answer
is the observation. Failures (a bad input, a refusal, a server that hangs or died)
are observations too, so the turn goes on.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from backend.core.agents.tools import ToolContext, ToolData, ToolResult
from backend.llm.json_values import json_values
from backend.llm.turn import StructuredReplyError, TurnLLM
from backend.tools.mcp_client import ServerLink, ToolInfo

SEPARATOR = "__"  # between the server's name and the tool's: OpenAI-safe, and rare in names
_DESCRIPTION_CHARS = 240


def agent_name(server: str, tool: str) -> str:
    """`<server>__<tool>`, in the characters a tool name may have anywhere (OpenAI's)."""
    return f"{server}{SEPARATOR}{re.sub(r'[^A-Za-z0-9_-]', '_', tool)[:64]}"


def is_mcp_tool(name: str) -> bool:
    return SEPARATOR in name


def _properties(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    return properties if isinstance(properties, dict) else {}


def _arguments_hint(schema: dict[str, Any]) -> str:
    """`{"timezone": string, required; "limit": integer}`: what the input must hold."""
    required = set(schema.get("required") or ())
    fields = []
    for name, spec in _properties(schema).items():
        spec = spec if isinstance(spec, dict) else {}
        kind = str(spec.get("type", "value"))
        fields.append(f'"{name}": {kind}{", required" if name in required else ""}')
    return "{" + "; ".join(fields) + "}" if fields else "{} (no arguments)"


def _text_argument(schema: dict[str, Any]) -> str | None:
    """The one text argument a plain-words input fills, if the tool has exactly one."""
    properties = _properties(schema)
    required = list(schema.get("required") or ())
    names = required if required else list(properties)
    if len(names) != 1:
        return None
    spec = properties.get(names[0])
    return names[0] if isinstance(spec, dict) and spec.get("type") == "string" else None


@dataclass
class McpTool:
    link: ServerLink
    info: ToolInfo
    llm: TurnLLM
    name: str = ""
    description: str = ""

    def __post_init__(self) -> None:
        self.name = agent_name(self.link.name, self.info.name)
        summary = " ".join(self.info.description.split())[:_DESCRIPTION_CHARS]
        self.description = (
            f"{summary or self.info.name} (MCP server {self.link.name}); input: a JSON object "
            f"{_arguments_hint(self.info.input_schema)}"
        )

    async def run(self, tool_input: str, context: ToolContext) -> ToolResult:
        arguments = await self._arguments(tool_input, context)
        if arguments is None:
            hint = _arguments_hint(self.info.input_schema)
            return context.ran(
                self.name,
                ToolResult(
                    f"Error: {self.name} takes a JSON object of arguments: {hint}. "
                    "Please fix your mistakes.",
                    False,
                ),
            )
        outcome = await self.link.call(self.info.name, arguments)
        data: ToolData = {"output": outcome.text, "arguments": arguments, "mcp": self.name}
        if not outcome.ok:
            error = outcome.text if outcome.text.startswith("Error:") else f"Error: {outcome.text}"
            return context.ran(self.name, ToolResult(error, False, {**data, "error": error}))
        return context.ran(
            self.name, ToolResult(f"Result of {self.name}:\n{outcome.text}", True, data)
        )

    async def _arguments(self, tool_input: str, context: ToolContext) -> dict[str, Any] | None:
        text = tool_input.strip()
        found = next((v for v in json_values(text) if isinstance(v, dict)), None)
        if found is not None:
            return found
        schema = self.info.input_schema
        if not _properties(schema) and not text:
            return {}
        if (name := _text_argument(schema)) is not None and text:
            return {name: text}
        prompt = (
            f"[stage: tool_arguments]\n## TOOL\n{self.name}: {self.info.description}\n"
            f"## ARGUMENTS SCHEMA\n{json.dumps(schema)[:3000]}\n"
            + (f"## PLAN\n{context.plan[:1500]}\n" if context.plan else "")
            + f"## INPUT\n{text}\n## TASK\nReply with only the JSON object of arguments "
            "that does INPUT."
        )
        try:
            return await self.llm.json_object("tool_arguments", "", prompt, schema)
        except StructuredReplyError:
            return None


class McpToolSource(Protocol):
    """Where the agents get the MCP tools a user may use (`backend/core/mcp_registry.py`)."""

    async def agent_tools(
        self, user_id: int, llm: TurnLLM, budget: int | None = None
    ) -> list[McpTool]: ...
