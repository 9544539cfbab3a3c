"""One loopback port for a module's stand-in upstreams, each test serving a fresh one on it.

A server's upstream address is a setting, fixed when it starts. For a module's tests to
share one server, they share the port it points at: each test `serve`s a new stand-in
there (tests/support/fake_openai.py's or fake_ollama.py's app), with its own counters and
requests, as a stand-in of its own on a port of its own would have. A request goes to
the app served when it arrived, so one still running from an earlier test stays with that
test's stand-in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tests.support import fake_ollama, fake_openai
from tests.support.threaded_server import ThreadedServer

Scope = dict[str, Any]


class StandInPort(ThreadedServer):
    def __init__(self, port: int) -> None:
        self._current = _Current()
        super().__init__(self._current, port)

    def serve(self, app: Any) -> None:
        """From now on, requests go to `app` (None: each gets a 503)."""
        self._current.app = app

    def serve_openai(self, tokens: int = 20, delay: float = 0.005) -> OpenAIStandIn:
        """A fresh FakeUpstreamThread's app: `url` is its `/v1`, as FakeUpstreamThread's is."""
        self.serve(fake_openai.create_app(tokens, delay))
        return OpenAIStandIn(f"{self.base_url}/v1")

    def serve_ollama(self, models: list[str], reply: str = "Hello from Ollama.") -> OllamaStandIn:
        """A fresh FakeOllama's app, with its own list of the request bodies it was sent."""
        stand_in = OllamaStandIn(self.base_url)
        self.serve(fake_ollama.create_app(models, reply, stand_in.requests))
        return stand_in

    def __exit__(self, *exc: object) -> None:
        # A stand-in may still be answering an earlier test (one that answers slowly on
        # purpose): stop without waiting for it.
        self.server.force_exit = True
        super().__exit__(*exc)


class _Current:
    """The ASGI app on the port: it hands each request to the app served at the time."""

    def __init__(self) -> None:
        self.app: Any = None

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":  # nothing to start: the apps come and go per test
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        app = self.app
        if app is None:
            await send({"type": "http.response.start", "status": 503, "headers": []})
            await send({"type": "http.response.body", "body": b"no stand-in is served here"})
            return
        await app(scope, receive, send)


@dataclass(frozen=True)
class OpenAIStandIn:
    url: str


@dataclass
class OllamaStandIn:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)  # /api/chat and /api/embed
