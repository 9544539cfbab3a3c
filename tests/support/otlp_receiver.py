"""An OTLP/HTTP trace receiver on loopback, for the tests and the load benchmark: it
accepts every export, counts them, and (with `keep`) decodes and keeps their spans."""

from __future__ import annotations

import gzip
import http.server
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Receiver(http.server.ThreadingHTTPServer):
    """POST /v1/traces; `spans` are opentelemetry.proto.trace.v1.trace_pb2.Span (kept only
    with `keep`, so a benchmark's receiver costs no decoding)."""

    def __init__(self, *, keep: bool = True) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.keep = keep
        self.exports = 0
        self.bytes = 0
        self.spans: list[Any] = []
        self.changed = threading.Condition()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def wait_for(self, name: str, timeout: float) -> Any:
        """The first span called `name`, once it has arrived."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                found = next((s for s in self.spans if s.name == name), None)
                if found is not None:
                    return found
                left = deadline - time.monotonic()
                assert left > 0, f"no {name!r} span in {timeout} s: {[s.name for s in self.spans]}"
                self.changed.wait(left)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path != "/v1/traces":
            self.send_error(404)
            return
        spans: list[Any] = []
        if self.server.keep:
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest.FromString(body)
            spans = [
                span
                for resource in request.resource_spans
                for scope in resource.scope_spans
                for span in scope.spans
            ]
        with self.server.changed:
            self.server.exports += 1
            self.server.bytes += len(body)
            self.server.spans += spans
            self.server.changed.notify_all()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def receiving(*, keep: bool = True) -> Iterator[Receiver]:
    receiver = Receiver(keep=keep)
    thread = threading.Thread(target=receiver.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver.shutdown()
        receiver.server_close()
        thread.join(10)
