"""A simulated llama.cpp server: an OpenAI-compatible upstream that charges time, not spends it.

`POST /v1/chat/completions` (plain JSON, or SSE with a last usage chunk) and
`GET /v1/models`, on loopback. A `Script` decides each reply; this module does
what llama.cpp's server would do around it, and writes down what it would cost:

- The request's messages (and its `tools`) are rendered to text with a ChatML
  template: `<|im_start|>{role}\\n{content}<|im_end|>\\n` per message, tool calls
  and tool results as text, the tools listed in the system message, and
  `<|im_start|>assistant\\n` to answer after. The text is split into tokens by a
  simple deterministic tokenizer: `<|im_start|>` and `<|im_end|>` are one token
  each, otherwise the regex `\\s?\\w+|\\s?[^\\w\\s]` (a word, or a punctuation
  mark, with the one space before it); whitespace before more whitespace or
  before a special token is a token of its own.
- Each slot (one by default, like `llama-server` started without `-np`) keeps the
  tokens it last processed, the prompt and then the reply. A request goes to the
  slot whose cached tokens share the longest prefix with its prompt (the least
  recently used slot when none shares any), and only the tokens past that prefix
  are processed; as in llama.cpp, the last prompt token is always processed again.
  A request with `cache_prompt: false` reuses nothing; the default is to reuse.
- A reply is cut at the request's `max_tokens` (or `max_completion_tokens`).

Nothing sleeps. Each call is recorded (`Call`: the caller's label, the stage,
prompt tokens, cached prompt tokens, generated tokens), and a `Profile` (prompt
processing at P tokens/s, generation at G tokens/s) turns calls into seconds.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.live_server import free_port
from tests.support.threaded_server import ThreadedServer

MODEL = "sim"
_TOKEN = re.compile(r"<\|im_start\|>|<\|im_end\|>|\s+(?=\s|<\|im_)|\s?\w+|\s?[^\w\s]")
_STREAM_PIECE = 16  # tokens per streamed chunk


@dataclass(frozen=True)
class Profile:
    """A model on some hardware: prompt processing and generation speeds, in tokens/s."""

    name: str
    prompt_tps: float
    generate_tps: float

    def seconds(self, calls: list[Call]) -> float:
        processed = sum(call.prompt_tokens - call.cached_tokens for call in calls)
        generated = sum(call.generated_tokens for call in calls)
        return processed / self.prompt_tps + generated / self.generate_tps


# A 7-8B model in Q4 on a consumer GPU, and the same model on a laptop's CPU.
GPU = Profile("GPU", prompt_tps=1500, generate_tps=40)
CPU = Profile("CPU", prompt_tps=60, generate_tps=8)


@dataclass(frozen=True)
class Reply:
    """What the script says: text, or one call of a tool with JSON arguments."""

    stage: str
    text: str = ""
    tool_call: tuple[str, str] | None = None  # (name, arguments)
    answer: bool = False  # the reply writes an answer for the user


Script = Callable[[list[dict[str, Any]], bool], Reply]  # (messages, has tools) -> reply


@dataclass(frozen=True)
class Call:
    label: str
    stage: str
    prompt_tokens: int
    cached_tokens: int
    generated_tokens: int
    answer: bool
    truncated: bool
    reply: str


def tokenize(text: str) -> list[str]:
    return _TOKEN.findall(text)


def content_text(content: Any) -> str:
    """A message's content as text (OpenAI allows a list of typed parts)."""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _tool_call_text(name: str, arguments: str) -> str:
    return f'<tool_call>\n{{"name": {json.dumps(name)}, "arguments": {arguments}}}\n</tool_call>'


def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
    """The prompt as the model reads it (ChatML), ending where the assistant answers."""
    messages = list(messages)
    if tools:
        listing = "\n".join(json.dumps(tool.get("function", tool)) for tool in tools)
        block = f"# Tools\n\n<tools>\n{listing}\n</tools>"
        if messages and messages[0].get("role") == "system":
            first = content_text(messages[0].get("content"))
            messages[0] = {"role": "system", "content": f"{first}\n\n{block}"}
        else:
            messages.insert(0, {"role": "system", "content": block})
    parts = []
    for message in messages:
        text = content_text(message.get("content"))
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            text += ("\n" if text else "") + _tool_call_text(
                function.get("name", ""), function.get("arguments", "{}")
            )
        role = {"developer": "system"}.get(message.get("role", "user"), message.get("role"))
        parts.append(f"<|im_start|>{role}\n{text}<|im_end|>\n")
    return "".join(parts) + "<|im_start|>assistant\n"


def _common_prefix(a: list[str], b: list[str]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class Slots:
    """llama.cpp's slots, each with the tokens it last processed."""

    count: int = 1
    cached: list[list[str]] = field(default_factory=list)
    last_used: list[int] = field(default_factory=list)
    clock: int = 0

    def __post_init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.cached = [[] for _ in range(self.count)]
        self.last_used = [0] * self.count

    def take(self, prompt: list[str], reuse: bool) -> tuple[int, int]:
        """(slot, prompt tokens served from its cache) for this prompt."""
        shared = [_common_prefix(tokens, prompt) for tokens in self.cached]
        best = max(shared)
        candidates = [i for i in range(self.count) if shared[i] == best]
        slot = min(candidates, key=lambda i: self.last_used[i])
        reused = min(best, len(prompt) - 1) if reuse else 0
        self.clock += 1
        self.last_used[slot] = self.clock
        return slot, max(reused, 0)

    def keep(self, slot: int, tokens: list[str]) -> None:
        self.cached[slot] = tokens


def _cut(text: str, limit: int | None) -> tuple[str, bool]:
    """`text` up to its `limit`-th token."""
    if limit is None:
        return text, False
    matches = list(_TOKEN.finditer(text))
    if len(matches) <= limit:
        return text, False
    return (text[: matches[limit - 1].end()] if limit > 0 else ""), True


class SimulatedLlamaCpp:
    """The server's state: its slots and the record of every call, labelled by `label`."""

    def __init__(self, script: Script, slots: int = 1) -> None:
        self.script = script
        self.slots = Slots(slots)
        self.calls: list[Call] = []
        self.label = ""  # set by the caller before each request it makes or causes

    def reset(self) -> None:
        """Cold caches (a freshly started server); the record is kept."""
        self.slots.reset()

    def complete(self, body: dict[str, Any]) -> tuple[Reply, dict[str, Any], Call]:
        messages = body.get("messages") or []
        tools = body.get("tools") or None
        reply = self.script(messages, bool(tools))
        rendered = render(messages, tools)
        prompt = tokenize(rendered)
        slot, cached = self.slots.take(prompt, bool(body.get("cache_prompt", True)))
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        text, truncated = _cut(reply.text, int(limit) if limit else None)
        generated = _tool_call_text(*reply.tool_call) if reply.tool_call is not None else text
        if not truncated:
            generated += "<|im_end|>"  # the end-of-turn token is generated too
        generated_tokens = len(tokenize(generated))
        # What the slot holds next: as the next prompt will spell it, reply included.
        self.slots.keep(slot, tokenize(rendered + generated))
        call = Call(
            label=self.label,
            stage=reply.stage,
            prompt_tokens=len(prompt),
            cached_tokens=cached,
            generated_tokens=generated_tokens,
            answer=reply.answer,
            truncated=truncated,
            reply=text if reply.tool_call is None else reply.tool_call[1],
        )
        self.calls.append(call)
        usage = {
            "prompt_tokens": call.prompt_tokens,
            "completion_tokens": generated_tokens,
            "total_tokens": call.prompt_tokens + call.generated_tokens,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        return Reply(reply.stage, text, reply.tool_call, reply.answer), usage, call

    def app(self) -> Starlette:
        async def chat(request: Request) -> Response:
            try:
                body = await request.json()
            except ValueError:
                return JSONResponse({"error": {"message": "the body is not JSON"}}, 400)
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                return JSONResponse({"error": {"message": "`messages` is required"}}, 400)
            reply, usage, call = self.complete(body)
            finish = "tool_calls" if reply.tool_call else ("length" if call.truncated else "stop")
            if body.get("stream"):
                include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
                chunks = _sse(reply, finish, usage if include_usage else None)
                return StreamingResponse(chunks, media_type="text/event-stream")
            message: dict[str, Any] = {"role": "assistant", "content": reply.text}
            if reply.tool_call:
                message = {"role": "assistant", "content": None, "tool_calls": [_call(reply)]}
            return JSONResponse(
                {
                    **_envelope("chat.completion"),
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": usage,
                }
            )

        async def models(request: Request) -> JSONResponse:
            return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

        return Starlette(
            routes=[
                Route("/v1/chat/completions", chat, methods=["POST"]),
                Route("/v1/models", models),
            ]
        )


def _envelope(kind: str) -> dict[str, Any]:
    return {"id": "chatcmpl-sim", "object": kind, "created": int(time.time()), "model": MODEL}


def _call(reply: Reply) -> dict[str, Any]:
    assert reply.tool_call is not None
    name, arguments = reply.tool_call
    return {
        "id": "call_sim",
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }


def _sse(reply: Reply, finish: str, usage: dict[str, Any] | None) -> Iterator[str]:
    def chunk(delta: dict[str, Any] | None, finish: str | None = None, **fields: Any) -> str:
        choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
        body = {**_envelope("chat.completion.chunk"), "choices": choices, **fields}
        return f"data: {json.dumps(body)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    if reply.tool_call:
        yield chunk({"tool_calls": [{"index": 0, **_call(reply)}]})
    else:
        ends = [match.end() for match in _TOKEN.finditer(reply.text)]
        start = 0
        for end in [*ends[_STREAM_PIECE - 1 :: _STREAM_PIECE], len(reply.text)]:
            if end > start:
                yield chunk({"content": reply.text[start:end]})
                start = end
    yield chunk({}, finish)
    if usage is not None:
        yield chunk(None, usage=usage)
    yield "data: [DONE]\n\n"


class SimulatedServer(ThreadedServer):
    """The simulated server on a free loopback port, from a thread of this process."""

    def __init__(self, script: Script, slots: int = 1) -> None:
        self.sim = SimulatedLlamaCpp(script, slots)
        super().__init__(self.sim.app(), free_port())
        self.url = f"{self.base_url}/v1"
