"""Tools the client defines (OpenAI `tools`): the client runs them in its own agent loop.

A backend with native tool calling (an OpenAI upstream; Ollama for `auto`) gets
the tools as they came. Otherwise the model is told about the tools in a system
message and answers with a JSON call; when a call is required (`required`, or a
named function) decoding is constrained to the call's JSON schema (a llama.cpp
grammar, Ollama's `format`), so even the embedded model produces a valid one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from backend.llm.chat_stream import new_call_id
from backend.llm.stream import ClientToolCall, FunctionCall


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as OpenAI sends it

    def public(self) -> ClientToolCall:
        return ClientToolCall(
            id=self.id, function=FunctionCall(name=self.name, arguments=self.arguments)
        )


@dataclass(frozen=True)
class ClientTools:
    tools: list[dict[str, Any]]  # OpenAI function tools, as sent
    choice: str | dict[str, Any] = "auto"  # auto | none | required | {"type": "function", ...}

    @property
    def names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.tools]

    @property
    def forced_name(self) -> str | None:
        if isinstance(self.choice, dict):
            return str(self.choice["function"]["name"])
        return None

    @property
    def required(self) -> bool:
        return self.choice == "required" or self.forced_name is not None

    @property
    def offered(self) -> list[dict[str, Any]]:
        """The tools the model may call under this choice."""
        name = self.forced_name
        return [t for t in self.tools if name is None or t["function"]["name"] == name]

    def call_schema(self) -> dict[str, Any]:
        """The JSON schema of one call: `{"name": ..., "arguments": {...}}`."""
        options = [
            {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "enum": [tool["function"]["name"]]},
                    "arguments": tool["function"].get("parameters") or {"type": "object"},
                },
                "required": ["name", "arguments"],
            }
            for tool in self.offered
        ]
        return options[0] if len(options) == 1 else {"anyOf": options}

    def prompt(self) -> SystemMessage:
        described = "\n".join(
            f"- {t['function']['name']}: {t['function'].get('description', '')}\n"
            f"  arguments (JSON schema): {json.dumps(t['function'].get('parameters') or {})}"
            for t in self.offered
        )
        rule = (
            "Call one of them now."
            if self.required
            else "If one of them helps, call it; otherwise answer normally."
        )
        return SystemMessage(
            f"You can call these tools:\n{described}\n{rule} To call a tool, reply with only "
            'a JSON object: {"name": "<tool>", "arguments": {...}}.'
        )

    def parse(self, text: str) -> ToolCall | None:
        """The first call in a reply: bare JSON, fenced, or after prose or reasoning."""
        names = [t["function"]["name"] for t in self.offered]
        decoder = json.JSONDecoder()
        for start in (i for i, ch in enumerate(text) if ch == "{"):
            try:
                data, _ = decoder.raw_decode(text, start)
            except ValueError:
                continue
            if not isinstance(data, dict) or data.get("name") not in names:
                continue
            arguments = data.get("arguments", data.get("parameters", {}))
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    continue
            if isinstance(arguments, dict):
                return ToolCall(new_call_id(), str(data["name"]), json.dumps(arguments))
        return None


def as_plain_messages(messages: list[BaseMessage]) -> list[BaseMessage]:
    """History for a model without native tools: calls and results written as text."""
    plain: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = [{"name": c["name"], "arguments": c["args"]} for c in message.tool_calls]
            text = str(message.text)
            plain.append(AIMessage(((text + "\n") if text else "") + json.dumps(calls)))
        elif message.type == "tool":
            call_id = getattr(message, "tool_call_id", "")
            plain.append(HumanMessage(f"Tool result ({call_id}): {message.text}"))
        else:
            plain.append(message)
    return plain
