"""The real app in the test process, reached through httpx's ASGI transport.

`InProcessServer` builds the app as `run_backend.py` does (`create_app` on the Settings
that a `LiveServer`'s environment gives), runs its lifespan on an event loop of its
own, and hands out ordinary `httpx.Client`s whose transport calls the app directly: no
child process to start, no socket. It answers to what tests use of a `LiveServer`
(`url`, `data_dir`, `env`, `token()`, `client()`).

Only for requests whose whole answer is read. Streams, disconnects, restarts, kill -9,
client addresses and the sandbox need a real server (live_server.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource

from backend.config import Settings
from backend.main import create_app
from tests.support.live_server import ROOT, free_port, server_env

T = TypeVar("T")


class _ChildSettings(Settings):
    """Settings from the given values and ROOT/.env only, as the server's child process
    reads them: this process's own environment (its OPENAI_* above all) stays out."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, dotenv_settings)


class _LoopTransport(httpx.BaseTransport):
    """A sync transport that hands each request to `httpx.ASGITransport` on the app's loop,
    so any number of sync clients (and the openai SDK) share one running app."""

    def __init__(self, asgi: httpx.ASGITransport, loop: asyncio.AbstractEventLoop) -> None:
        self._asgi = asgi
        self._loop = loop

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        future = asyncio.run_coroutine_threadsafe(self._send(request, body), self._loop)
        read_timeout = request.extensions.get("timeout", {}).get("read")
        try:
            return future.result(timeout=read_timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise httpx.ReadTimeout("the app did not answer in time", request=request) from None

    async def _send(self, request: httpx.Request, body: bytes) -> httpx.Response:
        forwarded = httpx.Request(
            request.method, request.url, headers=request.headers, content=body
        )
        response = await self._asgi.handle_async_request(forwarded)
        raw = b"".join([chunk async for chunk in response.stream])  # type: ignore[union-attr]
        # Raw bytes: the sync client decodes them as it would a socket's.
        return httpx.Response(response.status_code, headers=response.headers, content=raw)


class InProcessServer:
    """One app in this process; `start()` builds it, `stop()` runs its shutdown."""

    def __init__(self, data_dir: Path, **env: str) -> None:
        self.data_dir = data_dir
        self.port = free_port()  # only for the settings and the Host header: nothing listens
        self.env = server_env(self.port, data_dir, **env)  # as a LiveServer's
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lifespan: AbstractAsyncContextManager[Any] | None = None
        self._transport: _LoopTransport | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> InProcessServer:
        environment = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
        environment.update(self.env)
        fields = {k: v for k, v in environment.items() if k in Settings.model_fields}
        # Strings, as the child reads them from its environment; pydantic parses them alike.
        settings = _ChildSettings(_env_file=ROOT / ".env", **fields)  # type: ignore[arg-type, call-arg]
        app = create_app(settings)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"app-{self.port}", daemon=True
        )
        self._thread.start()
        self._lifespan = app.router.lifespan_context(app)
        try:
            self._run(self._lifespan.__aenter__())
        except BaseException:
            self._lifespan = None  # it never started: nothing to shut down but the loop
            self.stop()
            raise
        # A failing route is a 500 answer, as uvicorn gives, not an exception in the test.
        asgi = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        self._transport = _LoopTransport(asgi, self._loop)
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        try:
            if self._lifespan is not None:
                self._run(self._lifespan.__aexit__(None, None, None))
            self._run(_cancel_the_rest())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            assert self._thread is not None
            self._thread.join(timeout=15)
            self._loop.close()
            self._loop = self._lifespan = self._transport = None

    def _run(self, step: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(step, self._loop).result(timeout=60)

    def http(self, **kwargs: Any) -> httpx.Client:
        """A client of the app with no credentials (it keeps cookies, like a browser)."""
        assert self._transport is not None, "start() the server first"
        kwargs.setdefault("timeout", 60)
        return httpx.Client(base_url=self.url, transport=self._transport, **kwargs)

    def request(
        self, method: str, path: str, cookies: dict[str, str] | None = None, **kwargs: Any
    ) -> httpx.Response:
        """One request from a fresh client, as `httpx.request(method, url)` sends it."""
        with self.http(cookies=cookies) as http:
            return http.request(method, path, **kwargs)

    def token(self, username: str = "admin", password: str | None = None) -> str:
        password = password or self.env["ADMIN_PASSWORD"]
        response = self.request(
            "POST", "/api/auth/login", json={"username": username, "password": password}
        )
        response.raise_for_status()
        return str(response.json()["access_token"])

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token or self.token()}"}
        return self.http(headers=headers, **kwargs)


async def _cancel_the_rest() -> None:
    """Cancel what requests left running (background work), as a stopping server does."""
    current = asyncio.current_task()
    rest = [task for task in asyncio.all_tasks() if task is not current]
    for task in rest:
        task.cancel()
    await asyncio.gather(*rest, return_exceptions=True)
