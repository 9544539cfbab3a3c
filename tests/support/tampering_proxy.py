"""A proxy in front of the test OpenID provider that can change the ID token of the next
token response, as a man in the middle (or a broken provider) would.

The provider is started with the proxy's URL as its issuer, so the browser and the server
under test reach it only through here. Every request is passed on unchanged (no redirect
followed, every Set-Cookie kept) except the token endpoint's answer while `tamper` is set:
its `id_token` goes through that function first. `resign` signs claims with the provider's
own private key, so an expired token or one for another nonce or issuer is genuinely signed.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from joserfc import jwt
from joserfc.jwk import KeySet
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.support.threaded_server import ThreadedServer

Tamper = Callable[[str], str]
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}


def unverified_claims(id_token: str) -> dict[str, Any]:
    """An ID token's claims, read without checking it."""
    payload = id_token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def resign(keys_file: Path, claims: dict[str, Any]) -> str:
    """`claims` signed with the provider's signing key (the first in its key file)."""
    key = KeySet.import_key_set(json.loads(keys_file.read_text())).keys[0]
    return jwt.encode({"alg": "RS256", "kid": key.kid}, claims, key)


def altered(id_token: str) -> str:
    """The token with one claim changed and its signature kept: no longer genuine."""
    header, _, signature = id_token.split(".")
    claims = unverified_claims(id_token)
    claims["groups"] = ["admins"]
    payload = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    return f"{header}.{payload}.{signature}"


def expired(keys_file: Path) -> Tamper:
    now = int(time.time())
    return lambda token: resign(
        keys_file, {**unverified_claims(token), "iat": now - 7200, "exp": now - 3600}
    )


def changed(keys_file: Path, **claims: Any) -> Tamper:
    return lambda token: resign(keys_file, {**unverified_claims(token), **claims})


class TamperingProxy(ThreadedServer):
    def __init__(self, port: int) -> None:
        self.upstream = ""  # the provider's own address, set once it listens
        self.tamper: Tamper | None = None
        self.token_path = "/token"
        super().__init__(Starlette(routes=[Route("/{path:path}", self._pass, methods=_ALL)]), port)

    async def _pass(self, request: Request) -> Response:
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
        async with httpx.AsyncClient(follow_redirects=False, timeout=30) as http:
            answer = await http.request(
                request.method,
                f"{self.upstream}{request.url.path}",
                params=request.url.query,
                headers=[*headers, ("host", request.headers.get("host", ""))],
                content=await request.body(),
            )
        body = answer.content
        if request.url.path == self.token_path and self.tamper and answer.status_code == 200:
            token = json.loads(body)
            token["id_token"] = self.tamper(token["id_token"])
            body = json.dumps(token).encode()
        response = Response(body, status_code=answer.status_code)
        for name, value in answer.headers.multi_items():
            if name.lower() not in HOP_BY_HOP and name.lower() != "content-encoding":
                response.headers.append(name, value)
        response.headers["content-length"] = str(len(body))
        return response


_ALL = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]
