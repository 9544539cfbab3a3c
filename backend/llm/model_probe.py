"""What one model can do: an operator's word (MODEL_PROFILES), else a short probe.

The backend's class says nothing about its model: Ollama serves `llama3.2:1b` and
`qwen2.5-coder:32b` alike. So each model's profile (`profile.py`) is decided on its own,
once, at its first use, from three facts:

- its context window (as learned, `LLMBackend.context_window`): below `LONG_CONTEXT`,
  each stage gets a short prompt of its own instead of the turn's shared head;
- whether it calls a tool in its API's own format when offered one (`native_tools`):
  if not, a client's tools are offered to it in a prompt and its JSON call is parsed;
- whether it fills a JSON schema with the right values when asked a little question
  (`size`): if not, it gets the embedded model's paths (code from a template, no review,
  no planning, a templated answer).

The two probe calls are short (a few dozen tokens each) and their answers are checked,
not trusted: a reply with the right shape but the wrong values is a failure.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import HumanMessage

from backend.llm.json_values import json_values
from backend.llm.options import GenerationOptions
from backend.llm.profile import CAPABLE, SMALL, ModelProfile

if TYPE_CHECKING:
    from backend.config.settings import ModelSetting
    from backend.llm.backends import LLMBackend

logger = logging.getLogger(__name__)

LONG_CONTEXT = 8192  # tokens: a smaller window gets a short prompt per stage
PROBE_TOKENS = 256  # each probe reply's cap

Size = Literal["small", "capable"]
Source = Literal["setting", "probe", "backend"]

TOOL_NAME = "record_total"
TOOL = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Record a total.",
        "parameters": {
            "type": "object",
            "properties": {"total": {"type": "integer", "description": "The total."}},
            "required": ["total"],
        },
    },
}
TOOL_PROMPT = f"Add 17 and 25, then record the total with the {TOOL_NAME} tool."
TOOL_TOTAL = 42

SCHEMA = {
    "title": "probe",
    "type": "object",
    "properties": {"city": {"type": "string"}, "letters": {"type": "integer"}},
    "required": ["city", "letters"],
}
JSON_PROMPT = (
    'Reply with a JSON object only: "city" is the capital of France, and "letters" is '
    'the number of letters in the word "table".'
)
JSON_ANSWER = ("paris", 5)


@dataclass(frozen=True)
class ModelAbilities:
    """A model's profile, its window, and where they came from."""

    profile: ModelProfile
    window: int
    source: Source
    follows_tools: bool | None = None  # the probe's findings (None: not probed)
    honours_schema: bool | None = None

    @property
    def size(self) -> Size:
        return "capable" if self.profile.free_form_code else "small"

    def public(self) -> dict[str, Any]:
        """What `/api/status` and the model list show."""
        shown: dict[str, Any] = {
            "size": self.size,
            "native_tools": self.profile.native_tools,
            "long_context": self.profile.long_context,
            "context_window": self.window,
            "source": self.source,
        }
        if self.source == "probe":
            shown["probe"] = {
                "follows_tools": self.follows_tools,
                "honours_schema": self.honours_schema,
            }
        return shown


def decided(size: Size, native_tools: bool, window: int) -> ModelProfile:
    """The profile of a model of `size` with `native_tools` and a `window` of tokens."""
    if size == "small":
        return SMALL  # already short prompts, no native tools
    profile = replace(CAPABLE, native_tools=native_tools)
    return profile if window >= LONG_CONTEXT else replace(profile, long_context=False)


def from_setting(setting: ModelSetting, native_default: bool, window: int) -> ModelAbilities:
    native = native_default if setting.native_tools is None else setting.native_tools
    return ModelAbilities(decided(setting.size, native, window), window, "setting")


async def probe(backend: LLMBackend, model: str, window: int) -> ModelAbilities:
    """Ask `model` the two probe questions (raises what the backend raises)."""
    chat = backend.chat_model(model)
    limits = backend.call_kwargs(GenerationOptions(max_tokens=PROBE_TOKENS))
    follows = False
    offered = backend.tool_kwargs([TOOL], "auto")
    if offered is not None:
        reply = await chat.ainvoke([HumanMessage(TOOL_PROMPT)], **limits, **offered)
        follows = any(_is_the_call(call) for call in getattr(reply, "tool_calls", None) or ())
    constrained = backend.structured_kwargs(SCHEMA) or {}
    reply = await chat.ainvoke([HumanMessage(JSON_PROMPT)], **limits, **constrained)
    honours = _is_the_object(str(reply.text))
    size: Size = "capable" if honours else "small"
    profile = decided(size, follows, window)
    logger.info(
        "Model %r: %s (a tool call: %s; a JSON reply: %s; window %d tokens)",
        model,
        size,
        "yes" if follows else "no",
        "yes" if honours else "no",
        window,
    )
    return ModelAbilities(profile, window, "probe", follows, honours)


def _is_the_call(call: Any) -> bool:
    if not isinstance(call, dict) or call.get("name") != TOOL_NAME:
        return False
    args = call.get("args")
    return isinstance(args, dict) and _integer(args.get("total")) == TOOL_TOTAL


def _is_the_object(reply: str) -> bool:
    for value in json_values(reply):
        if isinstance(value, dict):
            city = str(value.get("city", "")).strip().strip(".").lower()
            return (city, _integer(value.get("letters"))) == JSON_ANSWER
    return False


def _integer(value: Any) -> int | None:
    """`value` as an integer: 42, 42.0 and "42" are 42."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() else None
