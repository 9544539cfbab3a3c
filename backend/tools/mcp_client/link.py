"""One MCP server's connection, owned by a task of its own.

The SDK's `Client` is an async context (anyio task groups): it must be entered and
left in one task. So a link runs `_own` in its own task, which connects (starting a
stdio server's child process), says it is ready, and holds the connection until
`close`. Calls from the agents' tasks use the client meanwhile. A link whose
connection broke (the child died, the server went away) is found dead by the next
turn's `tools` (a ping) or by a failing call, and is started again on next use.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
from typing import Any, TextIO

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from backend.tools.mcp_client.endpoint import Endpoint, ToolInfo, ToolOutcome
from backend.tools.mcp_client.environment import RefusedSecret
from backend.tools.mcp_client.failures import described, refusal
from backend.tools.mcp_client.program import ProgramBounds

_PING_SECONDS = 5.0  # a live server answers a ping at once; past this it is taken as dead
_LOG_TAIL = 600  # characters of a stdio server's stderr shown when it fails


class McpUnavailable(Exception):
    """The server could not be reached or started; the message says why."""


class ServerLink:
    def __init__(
        self,
        endpoint: Endpoint,
        *,
        label: str,
        bounds: ProgramBounds,
        connect_timeout: float,
        call_timeout: float,
        max_chars: int,
    ) -> None:
        self.endpoint = endpoint
        self.fingerprint = endpoint.fingerprint()
        self.label = label  # names its scratch folders
        self.bounds = bounds
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self.max_chars = max_chars
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._client: Client | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._failure = ""
        self.listed: list[ToolInfo] = []  # the last listing, kept across restarts
        self._relist = True  # this connection has not listed the tools yet
        self._log: TextIO | None = None
        self._http_status: int | None = None  # the last HTTP error status it answered

    @property
    def name(self) -> str:
        return self.endpoint.name

    async def tools(self) -> list[ToolInfo]:
        """The server's tools, listed once per connection; a dead server is restarted.
        When this fails, `listed` still holds the last listing."""
        client = await self._connected(check=True)
        if self._relist:
            try:
                with anyio.fail_after(self.call_timeout):
                    found = await client.list_tools()
            except TimeoutError:
                raise McpUnavailable(self._late("list its tools")) from None
            except Exception as exc:
                self._stop.set()
                raise McpUnavailable(f"MCP server '{self.name}' failed: {self._why(exc)}") from None
            self.listed = [
                ToolInfo(t.name, (t.description or "").strip(), dict(t.input_schema or {}))
                for t in found.tools
            ]
            self._relist = False
        return self.listed

    async def call(self, tool: str, arguments: dict[str, Any]) -> ToolOutcome:
        """`tool`'s result as text; every failure is an outcome that says what happened."""
        try:
            client = await self._connected()
            with anyio.fail_after(self.call_timeout):
                result = await client.call_tool(tool, arguments)
        except McpUnavailable as exc:
            return ToolOutcome(f"Error: {exc}", False)
        except TimeoutError:
            return ToolOutcome(
                f"Error: {self._late(f'answer {tool}')}; the call was cut off.", False
            )
        except MCPError as exc:
            why = refusal(exc, self._http_status)
            return ToolOutcome(f"Error: {self.name} refused {tool}: {why}", False)
        except Exception as exc:  # the connection broke: the next use starts it again
            self._stop.set()
            return ToolOutcome(f"Error: MCP server '{self.name}' failed: {self._why(exc)}", False)
        text, cut = _text_of(result, self.max_chars)
        return ToolOutcome(text, not result.is_error, cut)

    async def close(self) -> None:
        """Disconnect (a stdio server's child process is stopped) and wait until it is done."""
        async with self._lock:
            await self._shutdown()
            if self._log is not None:
                self._log.close()
                self._log = None

    # The connection

    async def _connected(self, check: bool = False) -> Client:
        async with self._lock:
            client = self._client
            running = client is not None and self._task is not None and not self._task.done()
            if running and client is not None and (not check or await self._answers(client)):
                return client
            await self._shutdown()
            return await self._start()

    async def _answers(self, client: Client) -> bool:
        try:
            with anyio.fail_after(_PING_SECONDS):
                await client.send_ping()
        except Exception:
            return False
        return True

    async def _start(self) -> Client:
        self._ready, self._stop = asyncio.Event(), asyncio.Event()
        self._failure, self._relist, self._http_status = "", True, None
        task = asyncio.create_task(self._own(), name=f"mcp-server:{self.name}")
        self._task = task
        ready = asyncio.create_task(self._ready.wait())
        try:
            await asyncio.wait(
                {ready, task}, timeout=self.connect_timeout, return_when="FIRST_COMPLETED"
            )
        finally:
            ready.cancel()
        if self._client is None:
            failure = self._failure
            await self._shutdown()
            if not failure:
                raise McpUnavailable(
                    self._late("connect", self.connect_timeout, "MCP_CONNECT_TIMEOUT")
                )
            raise McpUnavailable(f"MCP server '{self.name}' could not be reached: {failure}")
        return self._client

    async def _own(self) -> None:
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = Client(self._transport(stack), cache=None)
                await stack.enter_async_context(client)
                self._client = client
                self._ready.set()
                await self._stop.wait()
        except McpUnavailable as exc:  # ours: it says why in our words
            self._failure = str(exc)
        except Exception as exc:
            self._failure = self._why(exc)
        finally:
            self._client = None

    def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        endpoint = self.endpoint
        if endpoint.transport == "http":
            http = httpx2.AsyncClient(
                headers=dict(endpoint.secrets),
                timeout=httpx2.Timeout(self.connect_timeout, read=self.call_timeout + 5),
                event_hooks={"response": [self._saw]},
            )
            stack.push_async_callback(http.aclose)
            return streamable_http_client(endpoint.url, http_client=http)
        if self._log is None:
            # Kept for the link's life, closed by `close`: each start rewrites it.
            self._log = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        self._log.seek(0)
        self._log.truncate()
        scratch = self.bounds.scratch(self.label)
        stack.callback(shutil.rmtree, scratch, ignore_errors=True)
        try:
            params = self.bounds.parameters(endpoint.command, endpoint.secrets, scratch)
        except RefusedSecret as exc:
            raise McpUnavailable(str(exc)) from None
        return stdio_client(params, errlog=self._log)

    async def _saw(self, response: httpx2.Response) -> None:
        """Keep an HTTP error's status: the SDK's error says less, or quotes the body."""
        if response.status_code >= 400:
            self._http_status = response.status_code

    async def _shutdown(self) -> None:
        task, self._task = self._task, None
        self._stop.set()
        if task is not None and not task.done():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, self.connect_timeout)
        self._client = None

    # Messages

    def _late(
        self, what: str, seconds: float | None = None, setting: str = "MCP_TOOL_TIMEOUT"
    ) -> str:
        limit = self.call_timeout if seconds is None else seconds
        return f"MCP server '{self.name}' did not {what} within {limit:g} s ({setting})"

    def _why(self, exc: BaseException) -> str:
        why = described(exc, self._http_status)
        if self._log is not None and self.endpoint.transport == "stdio":
            self._log.seek(0)
            tail = self._log.read()[-_LOG_TAIL:].strip()
            if tail:
                why += f" (its output ends: {tail})"
        return why


def _text_of(result: types.CallToolResult, limit: int) -> tuple[str, bool]:
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.type}: {block.mime_type}]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource: {resource.uri}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource: {block.uri}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts).strip() or "(the tool returned nothing)"
    if len(text) <= limit:
        return text, False
    return text[:limit] + f"\n… (cut at {limit} characters)", True
