"""An Ollama stand-in on loopback that cuts prompts the way Ollama does.

Ollama loads a model with the request's `num_ctx` (4,096 when none is sent). A chat
prompt longer than that first loses its older messages (server/prompt.go's
`chatPrompt`: the system messages before the kept ones stay, the last message
always stays, and older ones go until the rendered prompt fits); if it is still
too long, the runner keeps its first `keep` (4) tokens and drops tokens after them
until it fits ("truncating input prompt"). It answers 200 either way, reporting
the tokens it read as `prompt_eval_count`.

Its tokenizer stands in for a real one: one token per digit, per five letters of
a word, per other visible character and per line break, and four per message for
the chat template. Each call is recorded with what arrived of it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from tests.support.threaded_server import ThreadedServer

DEFAULT_NUM_CTX = 4096
NUM_KEEP = 4
TEMPLATE_TOKENS = 4
_PIECES = re.compile(r"[A-Za-z]+|\d|\n+|[^\sA-Za-z\d]")

Replier = Callable[[list[dict[str, Any]]], str]


def tokens(text: str) -> int:
    return sum(
        math.ceil(len(piece) / 5) if piece[0].isalpha() else 1 for piece in _PIECES.findall(text)
    )


def message_tokens(messages: list[dict[str, Any]], tools: list[Any] | None) -> int:
    schema = tokens(json.dumps(tools)) if tools else 0
    return schema + sum(tokens(str(m.get("content") or "")) + TEMPLATE_TOKENS for m in messages)


@dataclass
class Call:
    """One `/api/chat` request, and what the model read of it."""

    body: dict[str, Any]
    num_ctx: int
    sent_tokens: int
    read_tokens: int
    dropped_messages: int  # older messages Ollama left out
    cut_tokens: int  # tokens the runner dropped after the first NUM_KEEP

    @property
    def truncated(self) -> bool:
        return bool(self.dropped_messages or self.cut_tokens)


@dataclass
class Truncation:
    """What Ollama would make of `messages` in a window of `num_ctx`."""

    kept: list[dict[str, Any]]
    dropped: int
    read: int
    cut: int


def truncate(messages: list[dict[str, Any]], tools: list[Any] | None, num_ctx: int) -> Truncation:
    last = len(messages) - 1
    start = last
    for index in range(last - 1, -1, -1):  # older messages, newest first, while they fit
        system = [m for m in messages[:index] if m.get("role") == "system"]
        if message_tokens([*system, *messages[index:]], tools) > num_ctx:
            break
        start = index
    kept = [m for m in messages[:start] if m.get("role") == "system"] + messages[start:]
    dropped = len(messages) - len(kept)
    read = message_tokens(kept, tools)
    cut = max(0, read - num_ctx)
    return Truncation(kept, dropped, read - cut, cut)


@dataclass
class TruncatingOllama(ThreadedServer):
    port: int
    model: str
    reply: Replier
    trained_context: int = 32768
    ignores_num_ctx: bool = False  # an Ollama whose model is always loaded with 4,096
    calls: list[Call] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self._app(), self.port)
        self.url = self.base_url

    def _app(self) -> Starlette:
        async def tags(request: Request) -> JSONResponse:
            return JSONResponse({"models": [{"name": self.model, "model": self.model}]})

        async def show(request: Request) -> JSONResponse:
            info = {"general.architecture": "qwen2", "qwen2.context_length": self.trained_context}
            return JSONResponse({"model_info": info, "parameters": ""})

        async def chat(request: Request) -> StreamingResponse:
            body = await request.json()
            options = body.get("options") or {}
            num_ctx = DEFAULT_NUM_CTX
            if options.get("num_ctx") and not self.ignores_num_ctx:
                num_ctx = min(int(options["num_ctx"]), self.trained_context)
            messages = body["messages"]
            tools = body.get("tools")
            cut = truncate(messages, tools, num_ctx)
            self.calls.append(
                Call(body, num_ctx, message_tokens(messages, tools), cut.read, cut.dropped, cut.cut)
            )
            text = self.reply(cut.kept)
            return StreamingResponse(_lines(body["model"], text, cut.read), media_type="x-ndjson")

        return Starlette(
            routes=[
                Route("/api/tags", tags),
                Route("/api/show", show, methods=["POST"]),
                Route("/api/chat", chat, methods=["POST"]),
            ]
        )


def _lines(model: str, text: str, read: int) -> Iterator[str]:
    base = {"model": model, "created_at": "2026-01-01T00:00:00Z"}
    for start in range(0, len(text), 200):
        message = {"role": "assistant", "content": text[start : start + 200]}
        yield json.dumps({**base, "message": message, "done": False}) + "\n"
    counts = {"prompt_eval_count": read, "eval_count": tokens(text)}
    done = {"role": "assistant", "content": ""}
    yield (
        json.dumps({**base, "message": done, "done": True, "done_reason": "stop", **counts}) + "\n"
    )
