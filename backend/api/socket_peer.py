"""The address a request's connection really came from, before any proxy header is
believed: a sign-in header is trusted only when that address is one of TRUSTED_PROXIES.

Uvicorn's proxy-header middleware (which the app adds inside this one) replaces the
request's client with the first address of `X-Forwarded-For` it does not trust; the
socket's own address is kept here first, under `PEER`.
"""

from __future__ import annotations

import ipaddress

from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

PEER = "pda.socket_peer"


class SocketPeerMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            client = scope.get("client")
            scope[PEER] = client[0] if client else None
        await self.app(scope, receive, send)


def from_trusted_proxy(request: Request, trusted: str) -> bool:
    """Whether the request's connection came from one of `trusted` (TRUSTED_PROXIES)."""
    peer = request.scope.get(PEER)
    if not peer or not trusted:
        return False
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:  # a Unix socket's path, say
        return False
    return any(address in ipaddress.ip_network(net, strict=False) for net in trusted.split(","))
