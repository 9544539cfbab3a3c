"""Plain chat straight to the upstream's wire protocol: the lean path.

Plain chat is the hottest path and, on the `openai` and `ollama` backends, close
to a proxy. LangChain's callbacks, message-chunk merging and the SDKs' response
models cost more per request than the proxying itself
(benchmarks/gateway_overhead.py), so this path skips them: the request goes out
on a pooled connection and each streamed chunk is decoded once into events. The
agents keep their LangChain models.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from backend.llm.chat_stream import CallPieces, ChatStream, usage_event
from backend.llm.stream import Accepted, ChatEvent, answer_delta

_ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
POOLS = 8  # connection pools per upstream, used in turn (see `Upstream.client`)
RETRIES = 3  # after the first try: dropped, refused or rate-limited requests
BACKOFF_SECONDS = 0.25
MAX_RETRY_WAIT = 10.0  # a 429 asking for longer goes back to the client as it is
ACCEPTED = Accepted()


class UpstreamError(Exception):
    """The upstream answered with an error status, or streamed something unreadable."""

    def __init__(self, status_code: int, message: str) -> None:
        super().__init__(f"{status_code}: {message}")
        self.status_code = status_code
        self.message = message


class Upstream:
    """One pooled HTTP client for an upstream, made in the event loop that uses it."""

    def __init__(
        self,
        base_url: str,
        timeout: httpx.Timeout,
        headers: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.headers = headers or {}
        self.transport = transport
        self._clients: list[httpx.AsyncClient] = []
        self._turn = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._draining: set[asyncio.Task[None]] = set()
        self._urls: dict[str, httpx.URL] = {}  # path -> absolute URL, parsed once

    def client(self) -> httpx.AsyncClient:
        """One of `POOLS` clients, in turn: httpcore scans every connection of a pool for
        each request it places, which at 64 concurrent streams cost more CPU than the
        relaying itself (p99 7.6x direct, against 3.9x with 8 smaller pools)."""
        loop = asyncio.get_running_loop()
        if not self._clients or self._loop is not loop:
            self._clients = [self._new_client() for _ in range(POOLS)]
            self._loop = loop
        self._turn = (self._turn + 1) % POOLS
        return self._clients[self._turn]

    def _new_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(
            base_url=self.base_url,
            timeout=self.timeout,
            headers=self.headers,
            transport=self.transport,
            # Drop idle connections before the server does (uvicorn after 5 s, which is
            # also httpx's default: a connection could be reused as it closed).
            limits=httpx.Limits(
                max_connections=None,
                max_keepalive_connections=64 // POOLS,
                keepalive_expiry=4,
            ),
        )

    async def aclose(self) -> None:
        for task in list(self._draining):
            task.cancel()
        if self._clients and self._loop is asyncio.get_running_loop():
            for client in self._clients:
                await client.aclose()
        self._clients = []

    @asynccontextmanager
    async def lines(self, path: str, body: dict[str, Any]) -> AsyncIterator[AsyncIterator[bytes]]:
        """A streamed POST's body, line by line; an error status raises `UpstreamError`.

        A reader that stops at the end of the answer leaves the body's tail (the
        chunked terminator) to a background task, which returns the connection to
        the pool without making the client wait for it.
        """
        url = self._urls.get(path) or self._urls.setdefault(path, httpx.URL(self.base_url + path))
        response = await self._send(self.client().build_request("POST", url, json=body))
        try:
            if response.status_code >= 400:
                await response.aread()
                raise UpstreamError(response.status_code, _error_text(response))
            lines = _lines(response)
            yield lines
        except BaseException:
            await response.aclose()
            raise
        task = asyncio.create_task(_read_to_end(lines, response))
        self._draining.add(task)
        task.add_done_callback(self._draining.discard)

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """Send, retrying what failed before any answer, a bounded number of times.

        A pooled connection can die between requests (the server timed it out, or
        shed it under load): the request failed before any answer, so it is sent
        again at once (unretried, under load, this surfaced as a 503 among 64
        concurrent streams). A refused connection (a server restarting) and a 429
        are retried after a back-off, the 429 after its `Retry-After` when that is
        short. Past `RETRIES`, the last failure is the caller's.
        """
        for attempt in range(RETRIES + 1):
            last = attempt == RETRIES
            try:
                response = await self.client().send(request, stream=True)
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
                if last:
                    raise
                await asyncio.sleep(0 if attempt == 0 else backoff(attempt))
                continue
            except httpx.ConnectError:
                if last:
                    raise
                await asyncio.sleep(backoff(attempt))
                continue
            wait = retry_after(response, attempt)
            if response.status_code != 429 or last or wait is None:
                return response
            await response.aclose()
            await asyncio.sleep(wait)
        raise AssertionError("unreachable")  # the last attempt returns or raises


def backoff(attempt: int) -> float:
    """Seconds before retry number `attempt + 1`: 0.25, 0.5, 1, …"""
    return float(BACKOFF_SECONDS * 2**attempt)


def retry_after(response: httpx.Response, attempt: int) -> float | None:
    """How long a 429 asks us to wait (its Retry-After, else the back-off); None when
    that is longer than we would hold a request for."""
    header = response.headers.get("retry-after", "")
    try:
        wait = float(header) if header else backoff(attempt)
    except ValueError:  # an HTTP date: not worth parsing for a short wait
        wait = backoff(attempt)
    return wait if 0 <= wait <= MAX_RETRY_WAIT else None


async def _lines(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    """The body's lines as bytes: SSE and NDJSON are UTF-8 and line-based, and
    `json.loads` reads bytes, so nothing is decoded twice."""
    pending = b""
    async for data in response.aiter_bytes():
        pending += data
        *complete, pending = pending.split(b"\n")
        for line in complete:
            yield line
    if pending:
        yield pending


async def _read_to_end(lines: AsyncIterator[bytes], response: httpx.Response) -> None:
    try:
        async for _ in lines:
            pass
    except httpx.HTTPError:
        pass  # the answer was complete; a broken tail only costs the connection
    finally:
        await response.aclose()


def openai_stream(upstream: Upstream, model: str) -> ChatStream:
    """Chat completions from an OpenAI-compatible server, streamed as events."""

    async def stream(
        messages: list[BaseMessage], call_kwargs: dict[str, Any]
    ) -> AsyncGenerator[ChatEvent, None]:
        body = {
            "model": model,
            "messages": openai_messages(messages),
            **call_kwargs,
            "stream": True,
            "stream_options": {"include_usage": True},  # for the stored turn and the audit log
        }
        pieces = CallPieces()
        finish: str | None = None
        done = False
        async with upstream.lines("/chat/completions", body) as lines:
            yield ACCEPTED
            async for line in lines:
                if not line.startswith(b"data:"):
                    continue  # blank separators, comments, `event:` lines
                data = line[5:].strip()
                if data == b"[DONE]":
                    done = True
                    break
                chunk = _decoded(data)
                for choice in chunk.get("choices") or ():
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        logprobs = (choice.get("logprobs") or {}).get("content")
                        yield answer_delta(delta["content"], logprobs)
                    for piece in delta.get("tool_calls") or ():
                        function = piece.get("function") or {}
                        pieces.add(
                            piece.get("index"),
                            piece.get("id"),
                            function.get("name"),
                            function.get("arguments"),
                        )
                    finish = choice.get("finish_reason") or finish
                usage = chunk.get("usage")
                if usage:
                    yield usage_event(
                        usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
                    )
        if not done and finish is None:
            raise UpstreamError(502, "the stream ended before the answer did")
        for event in pieces.ending(finish):
            yield event

    return stream


def ollama_stream(upstream: Upstream, model: str) -> ChatStream:
    """Ollama's `/api/chat`, streamed as events."""

    async def stream(
        messages: list[BaseMessage], call_kwargs: dict[str, Any]
    ) -> AsyncGenerator[ChatEvent, None]:
        body = {"model": model, "messages": ollama_messages(messages), **call_kwargs}
        body["stream"] = True
        pieces = CallPieces()
        finish: str | None = None
        async with upstream.lines("/api/chat", body) as lines:
            yield ACCEPTED
            async for line in lines:
                if not line.strip():
                    continue
                chunk = _decoded(line)
                message = chunk.get("message") or {}
                if message.get("content"):
                    yield answer_delta(message["content"], chunk.get("logprobs"))
                for call in message.get("tool_calls") or ():
                    function = call.get("function") or {}
                    arguments = function.get("arguments")
                    if not isinstance(arguments, str):
                        arguments = json.dumps(arguments or {})
                    pieces.add(None, call.get("id"), function.get("name"), arguments)
                if chunk.get("done"):
                    finish = chunk.get("done_reason") or "stop"
                    yield usage_event(
                        chunk.get("prompt_eval_count") or 0, chunk.get("eval_count") or 0
                    )
                    break
        if finish is None:
            raise UpstreamError(502, "the stream ended before the answer did")
        for event in pieces.ending(finish):
            yield event

    return stream


def _decoded(data: bytes) -> dict[str, Any]:
    try:
        chunk = json.loads(data)
    except ValueError:
        shown = data[:200].decode(errors="replace")
        raise UpstreamError(502, f"streamed something that is not JSON: {shown!r}") from None
    if not isinstance(chunk, dict):
        shown = data[:200].decode(errors="replace")
        raise UpstreamError(502, f"streamed something that is not a JSON object: {shown!r}")
    error = chunk.get("error")
    if error:  # some servers report a failure mid-stream as a chunk
        message = error.get("message") if isinstance(error, dict) else error
        raise UpstreamError(502, str(message))
    return chunk


def _error_text(response: httpx.Response) -> str:
    """The upstream's own words: OpenAI's `{"error": {"message"}}`, Ollama's `{"error"}`."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return response.text[:500] or response.reason_phrase
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error or response.text[:500])


def openai_messages(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages in OpenAI's chat format."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        item: dict[str, Any] = {"role": _ROLES.get(message.type, "user"), "content": message.text}
        if isinstance(message, AIMessage) and message.tool_calls:
            item["content"] = message.text or None
            item["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
                }
                for call in message.tool_calls
            ]
        elif isinstance(message, ToolMessage):
            item["tool_call_id"] = message.tool_call_id
        wire.append(item)
    return wire


def ollama_messages(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    """LangChain messages in Ollama's chat format (call arguments are objects)."""
    wire: list[dict[str, Any]] = []
    names: dict[str, str] = {}  # call id -> tool name, for the tool results
    for message in messages:
        item: dict[str, Any] = {"role": _ROLES.get(message.type, "user"), "content": message.text}
        if isinstance(message, AIMessage) and message.tool_calls:
            item["tool_calls"] = [
                {"function": {"name": call["name"], "arguments": call["args"]}}
                for call in message.tool_calls
            ]
            names.update((str(call["id"]), call["name"]) for call in message.tool_calls)
        elif isinstance(message, ToolMessage) and message.tool_call_id in names:
            item["tool_name"] = names[message.tool_call_id]
        wire.append(item)
    return wire
