"""Security headers on every response, set once at the edge.

Every response says `nosniff` and sends no referrer. HTML gets a CSP unless its
route set one: the UI has its own strict one (`ui.py`), the API docs load
Swagger UI and ReDoc from their CDN with an inline bootstrap script, and any
other HTML may load nothing at all. Pure ASGI, so streams pass untouched.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

ALWAYS = (
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
DOCS_PATHS = ("/docs", "/redoc")
DOCS_POLICY = (
    b"default-src 'self'; script-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net; "
    b"style-src 'self' 'unsafe-inline' https://cdn.jsdelivr.net https://fonts.googleapis.com; "
    b"font-src 'self' https://fonts.gstatic.com; img-src 'self' data: https://fastapi.tiangolo.com "
    b"https://cdn.redoc.ly; worker-src 'self' blob:; frame-ancestors 'none'"
)
HTML_POLICY = b"default-src 'none'; frame-ancestors 'none'"


class SecurityHeadersMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        docs = str(scope.get("path", "")).startswith(DOCS_PATHS)

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers += [(name, value) for name, value in ALWAYS if name not in present]
                content_type = next((v for n, v in headers if n.lower() == b"content-type"), b"")
                if (
                    content_type.startswith(b"text/html")
                    and b"content-security-policy" not in present
                ):
                    headers.append(
                        (b"content-security-policy", DOCS_POLICY if docs else HTML_POLICY)
                    )
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)
