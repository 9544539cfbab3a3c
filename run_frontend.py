"""Serve the browser UI in `frontend/`: `python run_frontend.py`.

The page talks to the API on PORT; FRONTEND_PORT is where the page itself is served.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import logging
import sys
from pathlib import Path

from backend.config import ConfigError, load_settings

FRONTEND_DIR = Path(__file__).resolve().parent / "frontend"


class _Handler(http.server.SimpleHTTPRequestHandler):
    api_port = 1007

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def do_GET(self) -> None:
        if self.path.split("?")[0] in ("/", "/index.html"):
            page = (FRONTEND_DIR / "index.html").read_text()
            tag = f'<meta name="api-port" content="{self.api_port}">'
            body = page.replace("<head>", f"<head>\n  {tag}", 1).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()


def main() -> int:
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.LOG_LEVEL)
    _Handler.api_port = settings.PORT
    handler = functools.partial(_Handler, directory=str(FRONTEND_DIR))
    server = http.server.ThreadingHTTPServer((settings.HOST, settings.FRONTEND_PORT), handler)
    print(f"UI on http://{settings.HOST}:{settings.FRONTEND_PORT}/ (API on port {settings.PORT})")
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
