"""Serve the browser UI on FRONTEND_PORT: `python run_frontend.py`.

The API server already serves the UI at `/`; this is for running the page on a
port of its own. It serves the same files under the same headers and forwards
`/api`, `/v1` and `/health` to the API on PORT, streaming the replies (server-sent
events included), so the page is same-origin here too and needs no CORS.

It sets `X-Forwarded-For` and `-Proto` itself, from the client's socket, dropping
whatever the client sent: start the API with TRUSTED_PROXIES=127.0.0.1 so that it
sees (and throttles logins by) each client's own address.
"""

from __future__ import annotations

import contextlib
import http.client
import http.server
import logging
import sys
from typing import BinaryIO

from backend.api.ui import ASSETS_DIR, CHART_FRAME_HEADERS, FRONTEND_DIR, UI_HEADERS
from backend.config import ConfigError, load_settings

_FORWARDED = ("/api/", "/v1/", "/health")
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"}
# Set here from the socket; a client's own would let it pick its address for each try.
_SET_HERE = {"x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "forwarded", "x-real-ip"}
_CHUNK = 64 * 1024


class _LimitedReader:
    """The request body: exactly Content-Length bytes of the client's stream."""

    def __init__(self, stream: BinaryIO, length: int) -> None:
        self.stream, self.left = stream, length

    def read(self, size: int = -1) -> bytes:
        size = self.left if size < 0 else min(size, self.left)
        data = self.stream.read(size) if size else b""
        self.left -= len(data)
        return data


class _Handler(http.server.SimpleHTTPRequestHandler):
    api_host = "127.0.0.1"
    api_port = 1007

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, directory=str(ASSETS_DIR), **kwargs)  # type: ignore[arg-type]

    def end_headers(self) -> None:
        if not self.path.startswith(_FORWARDED):
            frame = self.path.split("?", 1)[0] == "/chart-frame"
            for name, value in (CHART_FRAME_HEADERS if frame else UI_HEADERS).items():
                self.send_header(name, value)
        super().end_headers()

    def translate_path(self, path: str) -> str:
        # Only the page, the chart frame and assets/ are served; the rest of frontend/
        # (node_modules) is not.
        if path.split("?", 1)[0] == "/":
            return str(FRONTEND_DIR / "index.html")
        if path.split("?", 1)[0] == "/chart-frame":
            return str(FRONTEND_DIR / "chart-frame.html")
        if path.startswith("/assets/"):
            return super().translate_path(path.removeprefix("/assets"))
        return str(FRONTEND_DIR / "missing")

    def do_GET(self) -> None:
        if self.path.startswith(_FORWARDED):
            self._forward()
        else:
            super().do_GET()

    def do_HEAD(self) -> None:
        if self.path.startswith(_FORWARDED):
            self._forward()
        else:
            super().do_HEAD()

    def do_POST(self) -> None:
        self._forward()

    do_PUT = do_PATCH = do_DELETE = do_POST

    def _forward(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        headers = {
            k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP | _SET_HERE
        }
        headers["Host"] = f"{self.api_host}:{self.api_port}"
        headers["X-Forwarded-For"] = self.client_address[0]
        headers["X-Forwarded-Proto"] = "http"
        upstream = http.client.HTTPConnection(self.api_host, self.api_port, timeout=3600)
        try:
            upstream.request(
                self.command,
                self.path,
                body=_LimitedReader(self.rfile, length) if length else None,  # type: ignore[arg-type]
                headers=headers,
                encode_chunked=False,
            )
            reply = upstream.getresponse()
        except OSError:
            self.send_error(502, f"The API on port {self.api_port} is not reachable.")
            return
        try:
            self.send_response(reply.status, reply.reason)
            for name, value in reply.getheaders():
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                    self.send_header(name, value)
            self.send_header("Connection", "close")
            self.end_headers()
            # Streamed as it arrives (server-sent events); the connection's end is the body's.
            with contextlib.suppress(OSError):
                while chunk := reply.read1(_CHUNK):
                    self.wfile.write(chunk)
                    self.wfile.flush()
        finally:
            upstream.close()
            self.close_connection = True


def main() -> int:
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.LOG_LEVEL)
    _Handler.api_host = settings.HOST if settings.HOST not in ("0.0.0.0", "::") else "127.0.0.1"
    _Handler.api_port = settings.PORT
    server = http.server.ThreadingHTTPServer((settings.HOST, settings.FRONTEND_PORT), _Handler)
    server.daemon_threads = True
    print(f"UI on http://{settings.HOST}:{settings.FRONTEND_PORT}/ (API on port {settings.PORT})")
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
