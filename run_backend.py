"""Start the API server, which also serves the UI: `python run_backend.py`."""

from __future__ import annotations

import contextlib
import gc
import logging
import socket
import sys

import uvicorn

from backend.config import ConfigError, load_settings
from backend.main import create_app
from backend.observability.tracing import TraceIdFilter


class _Server(uvicorn.Server):
    """Uvicorn, announcing the one URL to open once it listens.

    Once started, what startup made (modules, routes, models, clients: most of the heap,
    and alive as long as the server) is frozen out of the garbage collector's sight. A
    full collection then walks what requests made, not all of that: under load, one had
    cost ~160 ms of the event loop every ~4 s (benchmarks/load.py's rounds that took half
    as long again, the same round in two servers given the same work). Once shut down it
    is thawed, so that the interpreter's exit frees it: frozen, the cycles that hold
    DuckDB's bindings outlived it, and nanobind reported each as leaked.
    """

    url = ""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            gc.collect()  # what is already garbage is freed, not frozen
            gc.freeze()
            print(f"\n  Open {self.url} in your browser.\n", flush=True)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets)
        gc.unfreeze()


class _NoRunningOn(logging.Filter):
    """Drop uvicorn's own "running on <address>" line, so one URL is printed, not two."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "running on" not in record.getMessage()


def main() -> int:
    try:
        settings = load_settings()
        logging.basicConfig(
            level=settings.LOG_LEVEL,
            format="%(asctime)s %(levelname)s %(name)s [trace %(trace_id)s]: %(message)s",
        )
        for handler in logging.getLogger().handlers:  # a request's trace id in its lines
            handler.addFilter(TraceIdFilter())
        app = create_app(settings)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    host = "127.0.0.1" if settings.HOST in ("0.0.0.0", "::") else settings.HOST
    server = _Server(
        uvicorn.Config(
            app,
            host=settings.HOST,
            port=settings.PORT,
            log_level=settings.LOG_LEVEL.lower(),
            # The app reads forwarded headers itself, only from TRUSTED_PROXIES, after
            # keeping the socket's address (backend/api/socket_peer.py).
            proxy_headers=False,
            access_log=settings.ACCESS_LOG,
        )
    )
    server.url = f"http://{host}:{settings.PORT}/"
    logging.getLogger("uvicorn.error").addFilter(_NoRunningOn())
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C, raised again after the shutdown
        server.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
