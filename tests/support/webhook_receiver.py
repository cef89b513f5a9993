"""A real webhook receiver: an HTTP server on a loopback port that records every
request and answers with the statuses a test scripts (200 once the script runs out)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.time() when the request was read


@dataclass
class Receiver:
    origin: str
    statuses: list[int] = field(default_factory=list)
    # Extra headers of the next answers (e.g. a Location for a redirect).
    answer_headers: dict[str, str] = field(default_factory=dict)
    requests: list[Received] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"{self.origin}/hooks/ram"

    @property
    def host_port(self) -> str:
        return self.origin.removeprefix("http://")

    def wait_for(self, count: int, seconds: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + seconds
        while True:
            with self.lock:
                if len(self.requests) >= count:
                    return list(self.requests)
            if time.monotonic() > deadline:
                raise AssertionError(f"the receiver got {len(self.requests)} request(s), expected {count}")
            time.sleep(0.01)


@contextmanager
def webhook_receiver() -> Iterator[Receiver]:
    receiver = Receiver(origin="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            return None

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with receiver.lock:
                receiver.requests.append(
                    Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.time())
                )
                status = receiver.statuses.pop(0) if receiver.statuses else 200
            self.send_response(status)
            for name, value in receiver.answer_headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        do_GET = do_POST  # noqa: N815 - a followed redirect would arrive as a GET

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.origin = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
