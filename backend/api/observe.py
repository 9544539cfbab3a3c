"""Each HTTP request measured (its route template, status class and time) and, with
tracing on, traced: a server span that is current while the request is handled, whose
trace id every response carries in `X-Trace-Id` (and an error's body in `trace_id`), so
a user's report leads to its trace."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from backend.observability.metrics import HTTP_REQUESTS, HTTP_SECONDS, status_class
from backend.observability.tracing import current_trace_id, server_span

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
TRACE_HEADER = b"x-trace-id"


class ObserveMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method = scope["method"] if scope["method"] in _METHODS else "other"
        started = time.perf_counter()
        status = 500  # a handler that raised without answering
        attributes = {"http.request.method": method}  # the route's template comes later
        with server_span(method, attributes) as span:
            trace_id = current_trace_id()
            header = [(TRACE_HEADER, trace_id.encode())] if trace_id else []

            async def sent(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                    if header:
                        message = {**message, "headers": [*message.get("headers", []), *header]}
                await send(message)

            try:
                await self.app(scope, receive, sent)
            finally:
                route = route_template(scope)
                HTTP_REQUESTS.labels(route, method, status_class(status)).inc()
                HTTP_SECONDS.labels(route, method).observe(time.perf_counter() - started)
                if span.is_recording():
                    span.update_name(f"{method} {route}")
                    span.set_attributes({"http.route": route, "http.response.status_code": status})


def route_template(scope: Scope) -> str:
    """The matched route's template (`/v1/containers/{container_id}`), never the path;
    a mounted app's prefix; `unmatched` for a 404 nothing routed."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str) and path:
        return path[:200]
    return "unmatched"
