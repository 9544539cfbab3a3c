"""`GET /metrics`: the Prometheus text format, for a scraper, not a user.

Off unless METRICS_ENABLED. It needs no token; instead only the addresses in
METRICS_ALLOWED (loopback by default) may read it: another gets a 403. Served on the
API's own port, or with METRICS_PORT on a port of its own (its own small server in the
same process), so that the API's port need not be reachable by the scraper.

On its own port the address checked is the socket's peer, never a forwarded one. On the
API's port it is the client's address as every route sees it: the peer's, or the one a
proxy in TRUSTED_PROXIES forwarded.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
from collections.abc import Iterator, Sequence

import uvicorn
from prometheus_client import make_asgi_app
from starlette.types import ASGIApp, Receive, Scope, Send

from backend.config import ConfigError
from backend.observability.metrics import REGISTRY

logger = logging.getLogger(__name__)

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def allowed_networks(setting: str) -> list[Network] | None:
    """METRICS_ALLOWED as networks; None for `*` (any address)."""
    entries = [entry.strip() for entry in setting.split(",") if entry.strip()]
    if "*" in entries:
        return None
    try:
        return [ipaddress.ip_network(entry, strict=False) for entry in entries]
    except ValueError as exc:
        raise ConfigError(
            f"METRICS_ALLOWED: {exc} (addresses or networks, comma-separated)"
        ) from None


class MetricsApp:
    """The exposition, behind the address check."""

    def __init__(self, allowed: Sequence[Network] | None) -> None:
        self.allowed = allowed
        self.exposition: ASGIApp = make_asgi_app(REGISTRY)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        if not self._allows(scope.get("client")):
            body = b"Forbidden: this address may not read the metrics (METRICS_ALLOWED).\n"
            await send(
                {
                    "type": "http.response.start",
                    "status": 403,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8")],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.exposition(scope, receive, send)

    def _allows(self, client: tuple[str, int] | None) -> bool:
        if self.allowed is None:
            return True
        if client is None:
            return False
        try:
            address = ipaddress.ip_address(client[0])
        except ValueError:
            return False
        return any(address in network for network in self.allowed)


class _MetricsServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the API server's own handlers stay: its stop stops this one


def metrics_server(app: MetricsApp, host: str, port: int) -> uvicorn.Server:
    """The metrics on a port of their own (run it with `serve()` in the app's loop).
    The client is the socket's peer: no forwarded header is read, whoever sends it."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        lifespan="off",
        # Left on, uvicorn believes X-Forwarded-For from FORWARDED_ALLOW_IPS, or else
        # from 127.0.0.1: any local process could claim an allowed address.
        proxy_headers=False,
    )
    return _MetricsServer(config)
